"""What a propel sandbox container is: its image, user and work dir, the scripts it runs besides the worker, the
labels that say who owns it, and the reaper of containers whose owner died (run by each new ``DockerSandbox`` and by
``python -m propel.sandbox.cleanup``)."""

from __future__ import annotations

import os
import socket

DEFAULT_IMAGE = "propel-sandbox:py3"
USER = "65534:65534"
# PID 1 of each container: reaps orphans (a fork bomb's zombies would otherwise fill the pids limit for good).
REAPER_SCRIPT = """
import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGCHLD})
while True:
    try:
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass
    except ChildProcessError:
        pass
    signal.sigtimedwait({signal.SIGCHLD}, 1.0)
"""
WORKDIR = "/work"
# A session's clean-up after its worker was lost mid-command, keeping the workspace that a restart would wipe: kill
# every process of the sandbox uid but PID 1 and this one, wait until the reaper has collected them, and empty /tmp
# and /dev/shm (as a local worker's respawn does), where a full disk would otherwise kill every new worker too.
KILL_ALL_SCRIPT = """
import os, shutil, signal, time
me, until = os.getpid(), time.monotonic() + 5
while any(int(p) not in (1, me) for p in os.listdir("/proc") if p.isdigit()):
    if time.monotonic() > until:
        raise SystemExit(1)
    try:
        os.kill(-1, signal.SIGKILL)
    except ProcessLookupError:
        pass
    time.sleep(0.01)
for scratch in ("/tmp", "/dev/shm"):
    for name in os.listdir(scratch) if os.path.isdir(scratch) else ():
        path = os.path.join(scratch, name)
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
        except OSError:
            pass
"""
LABEL = "propel.sandbox"
"""Label on every container propel creates; its value says what for ("worker" or "session")."""


def container_labels(kind: str) -> dict[str, str]:
    """The labels of a container propel creates: its purpose, and which process on which host owns it."""
    return {LABEL: kind, f"{LABEL}.host": socket.gethostname(), f"{LABEL}.host_pid": str(os.getpid())}


def reap_stale_containers(client) -> int:
    """Remove the sandbox containers of this host whose owning process is gone; returns how many.

    A trainer killed with SIGKILL (or OOM) runs no finalizer, so its containers would otherwise live on. Containers
    of live processes, of other users' processes and of other hosts sharing the engine are left alone.
    """
    from docker.errors import APIError, NotFound

    host = socket.gethostname()
    removed = 0
    for info in client.api.containers(all=True, filters={"label": [LABEL, f"{LABEL}.host={host}"]}):
        try:
            pid = int((info.get("Labels") or {}).get(f"{LABEL}.host_pid", ""))
        except ValueError:
            continue
        if pid <= 0 or pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # alive
        except ProcessLookupError:
            pass
        except PermissionError:
            continue  # alive, another user's
        try:
            client.api.remove_container(info["Id"], force=True)
        except NotFound:
            continue  # another reaper was faster
        except APIError as err:
            if err.status_code == 409:  # "removal ... is already in progress": another reaper is at it
                continue
            raise
        removed += 1
    return removed


def host_errors() -> tuple[type[Exception], ...]:
    """What a call to a Docker host raises when the host is gone: the SDK's errors, and the HTTP client's (a ping or
    a call through a dropped connection raises those unwrapped)."""
    import requests
    from docker.errors import DockerException

    return DockerException, requests.RequestException
