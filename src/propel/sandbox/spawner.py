"""Start worker processes from one long-lived thread, so they do not die when the calling thread ends.

``bwrap --die-with-parent`` (and any ``PR_SET_PDEATHSIG``) fires when the *thread* that forked the process exits,
not the process: a worker started from a short-lived thread (``run_many``'s thread pool) would be SIGKILLed as soon
as that thread finished, and the next job on it would come back "worker lost". Forking from one daemon thread that
lives as long as this process keeps the guarantee we want (workers die with the trainer) without that trap.
"""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import TypeVar

T = TypeVar("T")

_lock = threading.Lock()
_tasks: queue.SimpleQueue | None = None
_owner_pid: int | None = None


def _serve(tasks: queue.SimpleQueue) -> None:
    while True:
        fn, future = tasks.get()
        if future.set_running_or_notify_cancel():
            try:
                future.set_result(fn())
            except BaseException as e:  # handed to the caller, who re-raises it
                future.set_exception(e)


def _queue() -> queue.SimpleQueue:
    """The spawner thread's task queue, started on first use (and again in a forked child, which lost it)."""
    global _tasks, _owner_pid
    with _lock:
        if _tasks is None or _owner_pid != os.getpid():
            _tasks, _owner_pid = queue.SimpleQueue(), os.getpid()
            threading.Thread(target=_serve, args=(_tasks,), name="propel-sandbox-spawner", daemon=True).start()
        return _tasks


def spawn_lasting(fn: Callable[[], T]) -> T:
    """Run ``fn`` (which starts a process) on the process-lifetime spawner thread and return its result."""
    future: Future = Future()
    _queue().put((fn, future))
    return future.result()
