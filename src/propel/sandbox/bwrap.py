"""Bubblewrap command lines for the local backend: no network, only the system's runtime visible (read-only), sized
private scratch, an unprivileged uid.

The host root is never bound: a job sees ``/usr`` (and the ``/bin``, ``/lib*``, ``/sbin`` links or folders), ``/etc``,
the interpreter's own installation and the paths passed as ``readable``/``writable``, all else is absent: no
``/run`` or ``/var/run`` (so no host Unix sockets such as the Docker daemon's), no home directories, no checkout, no
host ``/tmp``. A trainer running as a non-root user keeps its supplementary groups inside a user namespace (the
kernel forbids dropping them there), which is why nothing the groups could open may be visible.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

SANDBOX_UID = 65534
"""The uid/gid a job sees inside the sandbox (``nobody``)."""
RUNTIME_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""Host folders a job may read: programs, libraries and system configuration (``/etc`` is world-readable)."""
SHM_MB = 64
"""Size of the private ``/dev/shm``."""


def bwrap_path() -> str | None:
    """The bubblewrap binary, or None when it is not installed."""
    return shutil.which("bwrap")


def runtime_binds(readable: Sequence[str] = ()) -> list[str]:
    """bwrap arguments showing the system runtime read-only: merged-/usr links as links, folders as binds, and each
    ``readable`` path (an interpreter outside ``/usr``) at its real location."""
    argv: list[str] = []
    for path in RUNTIME_DIRS:
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            argv += ["--ro-bind", path, path]
    covered = [os.path.realpath(p) for p in RUNTIME_DIRS if os.path.isdir(p)]
    for path in readable:
        real = os.path.realpath(path)
        if not any(real == c or real.startswith(c + os.sep) for c in covered):
            argv += ["--ro-bind", real, real]
    return argv


def python_home(python: str) -> str:
    """The installation a Python interpreter lives in (``<prefix>/bin/python3`` -> ``<prefix>``), real path."""
    return os.path.dirname(os.path.dirname(os.path.realpath(python)))


def bwrap_argv(
    inner: Sequence[str],
    scratch_mb: int,
    bwrap: str = "bwrap",
    writable: Sequence[str] = (),
    chdir: str = "/tmp",
    readable: Sequence[str] = (),
    as_pid_1: bool = False,
) -> list[str]:
    """Wrap ``inner`` so it sees only the runtime (read-only), fresh /dev and /proc, sized private /tmp and
    /dev/shm, its own POSIX message queues, and no network.

    ``--unshare-all`` cuts the network, IPC, PID and UTS namespaces; ``--unshare-user --uid 65534`` makes the job
    unprivileged inside its own user namespace (with the process started as a non-root host uid, ``RLIMIT_NPROC``
    then counts only this sandbox's processes). The root, ``/dev`` and everything bound are read-only; only
    ``/tmp`` (``scratch_mb``), ``/dev/shm`` (``SHM_MB``), ``/dev/mqueue`` and the ``writable`` host directories
    (bound after /tmp, so they may live under it) can be written. ``as_pid_1``: ``inner`` is PID 1 of the PID
    namespace, so no process in the sandbox can stop or kill it.
    """
    argv = [bwrap, *runtime_binds(readable), "--dev", "/dev", "--proc", "/proc"]
    argv += ["--size", str(scratch_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    argv += ["--size", str(SHM_MB * 1024 * 1024), "--tmpfs", "/dev/shm", "--mqueue", "/dev/mqueue"]
    for path in writable:
        argv += ["--bind", path, path]
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    argv += ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--chdir", chdir]
    if as_pid_1:
        argv.append("--as-pid-1")
    return [*argv, "--", *inner]
