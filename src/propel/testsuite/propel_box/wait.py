"""Wait for a graded child under a wall-clock limit while draining its pipes, then kill its whole session.

Every in-sandbox runner waits for its children this way: the child runs in its own session (``setsid``), so killing
the process group also ends anything it left behind; pipes are drained while waiting, so a child that writes more
than a pipe buffer never blocks on a parent that is only waiting for it to exit.
"""

import contextlib
import os
import select
import signal
import time


def kill_session(pid):
    """SIGKILL the child's process group and the child itself (whichever still exists)."""
    for target in (lambda: os.killpg(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGKILL)):
        with contextlib.suppress(OSError):
            target()


def _read_ready(fds, chunks, cap):
    """Read what is ready on ``fds`` into ``chunks`` (at most ``cap`` bytes each); return the fds still open."""
    still = []
    for fd in fds:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            still.append(fd)
            continue
        except OSError:
            continue
        if not data:
            continue
        got = chunks.setdefault(fd, bytearray())
        if len(got) < cap:
            got += data[: cap - len(got)]
        still.append(fd)
    return still


def wait_child(pid, timeout_s, drain=(), cap=1 << 24):
    """``(status, timed_out, {fd: bytes})``: the child's wait status, whether it ran past ``timeout_s`` (it is then
    killed with its session), and what was read from each fd of ``drain`` (at most ``cap`` bytes each; the read ends
    are left open for the caller to close)."""
    deadline = time.monotonic() + timeout_s
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None
    for fd in drain:
        os.set_blocking(fd, False)
    open_fds, chunks, timed_out, status = list(drain), {}, False, None
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            kill_session(pid)
            _, status = os.waitpid(pid, 0)
            break
        watch = list(open_fds) + ([pidfd] if pidfd is not None else [])
        if watch:
            ready, _, _ = select.select(watch, [], [], left if pidfd is not None else min(left, 0.005))
            ready_pipes = [fd for fd in ready if fd in open_fds]
            if ready_pipes:
                kept = _read_ready(ready_pipes, chunks, cap)
                open_fds = [fd for fd in open_fds if fd not in ready_pipes or fd in kept]
        else:
            time.sleep(min(left, 0.005))
    if pidfd is not None:
        os.close(pidfd)
    kill_session(pid)
    while open_fds:  # what the child wrote before it ended (its write ends are closed now: EOF comes)
        ready, _, _ = select.select(open_fds, [], [], 0.2)
        if not ready:
            break
        kept = _read_ready(ready, chunks, cap)
        open_fds = [fd for fd in open_fds if fd not in ready or fd in kept]
    return status, timed_out, {fd: bytes(data) for fd, data in chunks.items()}
