"""Host uids for sandbox workers, each held by one holder at a time across every process on this host.

Running as root, each worker slot and each session runs as a uid of its own, so that ``RLIMIT_NPROC`` applies to it
alone and no job can signal another's processes. Two sandboxes (two trainers on one machine, a benchmark beside the
test suite) must never share one: the other's process count would eat into the limit, and a session's clean-up kills
every process of its uid. A uid is taken by an exclusive ``flock`` on ``<folder>/<uid>.lock``; the kernel releases
it when the holder closes it or dies, so a crashed trainer leaves no stale claim.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import stat
import tempfile
import threading

from propel.sandbox.job import SandboxError
from propel.sandbox.processes import kill_uid

DEFAULT_SPAN = 4096
"""How many uids from the base a host's sandboxes may take."""


def lease_folder() -> str:
    """The root-only folder of lock files (created on first use)."""
    folder = os.path.join(tempfile.gettempdir(), f"propel-sandbox-uids-{os.geteuid()}")
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        raise SandboxError(f"{folder} must be a directory of uid {os.geteuid()} that no one else can write")
    return folder


class UidLeases:
    """Claims and releases host uids in ``[base, base + span)`` for one sandbox."""

    def __init__(self, base: int, span: int = DEFAULT_SPAN):
        if base <= 0 or span <= 0:
            raise ValueError(f"uid leases need base > 0 and span > 0, got base={base}, span={span}")
        self.base, self.span = base, span
        self._held: dict[int, int] = {}  # uid -> the open lock file's fd
        self._lock = threading.Lock()

    def claim(self) -> int:
        """The lowest uid no one on this host holds, now held by this object; anything still running as it (left
        by a holder that died) is killed first."""
        folder = lease_folder()
        with self._lock:
            for uid in range(self.base, self.base + self.span):
                if uid in self._held:
                    continue
                fd = os.open(os.path.join(folder, f"{uid}.lock"), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                self._held[uid] = fd
                break
            else:
                raise SandboxError(f"all {self.span} sandbox uids from {self.base} are held by other sandboxes")
        kill_uid(uid)
        return uid

    def release(self, uid: int) -> None:
        with self._lock:
            fd = self._held.pop(uid, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        for uid in list(self._held):
            self.release(uid)
