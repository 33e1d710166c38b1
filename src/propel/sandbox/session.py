"""A persistent workspace for one episode of a multi-turn, tool-using agent.

Commands run one after another with the same directory as their cwd (and HOME and TMPDIR), so what one command
writes the next can read; ``close()`` kills everything and deletes the workspace. Each command is still a fresh child
of a warm worker (the one-shot worker with its ``workspace`` option) with its own process group, rlimits and
wall-clock limit, and **background processes a command starts are killed when that command returns**: only files
in the workspace carry over (``/tmp``, ``/dev/shm`` and IPC objects are emptied after each command), so a server an
agent needs must be started and used within one command.
"""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod

from propel.sandbox.job import Job, Limits, Result
from propel.sandbox.pool import WorkerPool
from propel.sandbox.protocol import Channel


class SessionBackend(ABC):
    """A backend's side of one session: where the workspace is, how its worker starts, how to recover from losing it.

    Holds no reference to its ``Session``, so the session's finalizer can own it without keeping the session alive.
    """

    workspace: str
    """The workspace path as jobs see it (their cwd)."""

    def __init__(self) -> None:
        self.notes: list[str] = []
        """Things the caller must hear about (the workspace was lost); appended to the next result's stderr."""

    @abstractmethod
    def spawn(self, slot: int) -> Channel:
        """Start the session's worker (again, after a loss) with the workspace option."""

    def on_lost(self, slot: int, pid: int | None) -> None:  # noqa: B027 - optional hook
        """Clean up after the worker was lost mid-command (keeping the workspace where possible); must not raise."""

    @abstractmethod
    def close(self) -> None:
        """Kill everything left and delete the workspace; called once, after the worker's channel is closed."""


def _shut(pool: WorkerPool, backend: SessionBackend) -> None:
    try:
        pool.close()
    finally:
        backend.close()


class Session:
    """A workspace that persists across ``run`` calls, with one command running at a time.

    Open one with ``sandbox.session()``; use it as a context manager or call ``close()`` (also done at exit)::

        with sandbox.session() as s:
            s.run(Job(command=["bash", "-c", "echo 1 > n"]))
            s.run(Job(command=["cat", "n"])).stdout  # "1\\n"
    """

    def __init__(self, backend: SessionBackend, limits: Limits):
        """Args:
        backend: the backend's side of this session (workspace, worker spawn, recovery, cleanup).
        limits: defaults for commands that carry no limits of their own.
        """
        self.workspace = backend.workspace
        self.limits = limits
        self._backend = backend
        self._pool = WorkerPool(backend.spawn, 1, on_lost=backend.on_lost)
        self._lock = threading.Lock()
        self._finalizer = weakref.finalize(self, _shut, self._pool, backend)
        try:
            self._pool.warm_up()  # a broken backend fails here, and the first command does not pay the start
        except BaseException:
            self.close()
            raise
        backend.notes.clear()

    def run(self, job: Job) -> Result:
        """Run one command in the workspace (``job.files`` are written there first, replacing what is there).

        Never raises for anything the command does: timeouts, crashes, floods and a killed worker come back as a
        ``Result``, and the next command finds the workspace as this one left it. Limits: ``job.limits`` or the
        session's defaults.
        """
        job.validate()
        with self._lock:
            if not self._finalizer.alive:
                raise RuntimeError("this sandbox session is closed")
            result = self._pool.run(job, job.limits or self.limits)
            if self._backend.notes:
                note = "\n".join(self._backend.notes)
                self._backend.notes.clear()
                result.stderr = f"{result.stderr}\n{note}" if result.stderr else note
            return result

    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def close(self) -> None:
        """Kill the worker and everything it started and delete the workspace; safe to call again."""
        self._finalizer()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"Session(workspace={self.workspace!r}, {state})"
