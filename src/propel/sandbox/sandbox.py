"""The sandbox interface: ``run``/``run_many`` jobs in isolation and open ``session``s, whatever the backend.

The types it exchanges (``Job``, ``Limits``, ``Result``, ``Outcome``, ``SandboxError``) live in ``job.py``.
"""

from __future__ import annotations

import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

from propel.sandbox.job import Job, Limits, Result

if TYPE_CHECKING:
    from propel.sandbox.session import Session


class Sandbox(ABC):
    """A backend that runs jobs in isolation. Use as a context manager to release workers/containers."""

    def __init__(self, limits: Limits | None = None, max_workers: int = 2):
        self.limits = limits or Limits()
        if not isinstance(self.limits, Limits):
            raise TypeError(f"sandbox limits must be a Limits, got {type(self.limits).__name__}")
        self.limits.validate()
        if isinstance(max_workers, bool) or not isinstance(max_workers, int):
            raise TypeError(f"max_workers must be an int, got {type(max_workers).__name__} {max_workers!r}")
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        self.max_workers = max_workers
        self._sessions: weakref.WeakSet[Session] = weakref.WeakSet()
        self._sessions_lock = threading.Lock()

    @abstractmethod
    def run(self, job: Job) -> Result:
        """Run one job and return its result; never raises for anything the job itself does."""

    def session(self, limits: Limits | None = None) -> Session:
        """Open a persistent workspace for one episode of a multi-turn agent (see ``propel.sandbox.session``).

        Commands run one at a time in the same directory, which outlives each command (its background processes do
        not) and is deleted by ``Session.close()``; ``limits`` (default: the sandbox's) apply to each command. The
        session has its own worker, so it never waits for, or holds up, the sandbox's ``run`` jobs.
        """
        raise NotImplementedError(f"{type(self).__name__} does not support sessions")

    def _track(self, session: Session) -> Session:
        """Remember an open session so that ``close()`` closes it too."""
        with self._sessions_lock:
            self._sessions.add(session)
        return session

    def _close_sessions(self) -> None:
        with self._sessions_lock:
            sessions = list(self._sessions)
        for session in sessions:
            session.close()

    def run_many(self, jobs: Sequence[Job]) -> list[Result]:
        """Run jobs concurrently (up to ``max_workers``); results in input order."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(self.max_workers) as pool:
            return list(pool.map(self.run, jobs))

    def warm_up(self) -> Sandbox:
        """Start workers/containers now rather than on first use (keeps start-up out of timings); returns self."""
        return self

    def close(self) -> None:
        """Release workers or containers, and close the sessions still open."""
        self._close_sessions()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
