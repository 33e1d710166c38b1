"""Bubblewrap command lines for the local backend: no network, read-only system, private /tmp, unprivileged uid."""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence

SANDBOX_UID = 65534
"""The uid/gid a job sees inside the sandbox (``nobody``)."""


def bwrap_path() -> str | None:
    """The bubblewrap binary, or None when it is not installed."""
    return shutil.which("bwrap")


def bwrap_argv(
    inner: Sequence[str],
    scratch_mb: int,
    hide: Sequence[str] = (),
    bwrap: str = "bwrap",
    writable: Sequence[str] = (),
    chdir: str = "/tmp",
) -> list[str]:
    """Wrap ``inner`` so it sees a read-only root, fresh /dev, /proc and a size-capped tmpfs /tmp, and no network.

    ``--unshare-all`` cuts the network, IPC, PID and UTS namespaces; ``--unshare-user --uid 65534`` makes the job
    unprivileged inside its own user namespace (with the process started as a non-root host uid, ``RLIMIT_NPROC``
    then counts only this sandbox's processes). ``hide`` gets an empty tmpfs over each path (home directories);
    ``writable`` host directories are bound read-write (after /tmp, so they may live under it).
    """
    argv = [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += ["--size", str(scratch_mb * 1024 * 1024), "--tmpfs", "/tmp"]
    for path in hide:
        argv += ["--tmpfs", path]
    for path in writable:
        argv += ["--bind", path, path]
    argv += ["--unshare-all", "--unshare-user", "--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)]
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox", "--chdir", chdir, "--"]
    return argv + list(inner)


def homes_to_hide(keep: Sequence[str]) -> list[str]:
    """Home directories to cover with an empty tmpfs, except ones holding a path the sandbox must still reach."""
    keep_real = [os.path.realpath(p) for p in keep]
    homes = {os.path.expanduser("~"), "/root", "/home"}
    out = []
    for home in sorted(homes):
        real = os.path.realpath(home)
        if real in ("/", "/tmp") or not os.path.isdir(real):
            continue
        if any(k == real or k.startswith(real + os.sep) for k in keep_real):
            continue
        out.append(real)
    return out
