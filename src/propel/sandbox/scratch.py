"""What a job leaves behind that the next must not find: files in scratch folders, System V IPC objects; and what a
job used: its workspace's disk space, the cgroup's OOM kills.

Standard library only: carried inside the in-sandbox worker's text (inlined by ``local.worker_source``).
"""

import contextlib
import os
import shutil

OOM_FILES = (("/sys/fs/cgroup/memory.events", "oom_kill"), ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"))
"""Where a cgroup (v2, v1) counts its OOM kills."""


def oom_kills():
    """The cgroup's OOM-kill count (None where no cgroup file says)."""
    for path, key in OOM_FILES:
        try:
            with open(path) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def remove_ipc(libc):
    """Remove the System V shared memory segments, message queues and semaphores left in this IPC namespace."""
    for kind, ctl in (("shm", "shmctl"), ("msg", "msgctl"), ("sem", "semctl")):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids = [int(line.split()[1]) for line in f.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        for ipc_id in ids:
            getattr(libc, ctl)(ipc_id, *((0,) if kind == "sem" else ()), 0, None)  # IPC_RMID == 0


def workspace_bytes(path, since_ns=None):
    """Disk space the workspace holds (allocated blocks, hard links once, symlinks not followed). A folder a command
    made unreadable is made readable again (it belongs to the job's uid, as it does to us) rather than skipped.

    With ``since_ns`` (a wall-clock time in ns): ``(held, written)``, where ``written`` is the space of the files
    (not folders) created or changed after that time; what only reads leaves it at 0."""
    total, written, seen, todo = 0, 0, set(), [path]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except PermissionError:
            try:
                os.chmod(folder, 0o700)
                entries = list(os.scandir(folder))
            except OSError:
                continue
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                todo.append(entry.path)
            elif since_ns is not None and st.st_ctime_ns > since_ns:
                written += st.st_blocks * 512
    return total if since_ns is None else (total, written)


def wipe(path, keep_root, keep=None):
    """Empty ``path`` (delete it too unless ``keep_root``), sparing the entry ``keep``; read-only folders a job
    left are made writable again first."""

    def fix(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    if not os.path.isdir(path):
        return
    if not keep_root:
        shutil.rmtree(path, onerror=fix)
        return
    for name in os.listdir(path):
        if name == keep:
            continue
        p = os.path.join(path, name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, onerror=fix)
        else:
            with contextlib.suppress(OSError):
                os.unlink(p)
