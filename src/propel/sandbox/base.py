"""The sandbox interface: a job in, a structured result out, whatever the backend.

Verifiers run model-written code thousands of times per step: a crash, hang or hostile program must come back as an
``Outcome``, never as an exception in the trainer.
"""

from __future__ import annotations

import enum
import threading
import weakref
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from propel.errors import PropelError

if TYPE_CHECKING:
    from propel.sandbox.session import Session


class SandboxError(PropelError):
    """The sandbox itself cannot run (no engine, missing image, worker fails to start): fix the environment."""


class Outcome(str, enum.Enum):
    """How a job ended."""

    OK = "ok"
    ERROR = "error"  # non-zero exit (exception, syntax error)
    TIMEOUT = "timeout"  # wall-clock or CPU limit
    MEMORY = "memory"  # address-space / cgroup memory limit
    OUTPUT_LIMIT = "output_limit"  # stdout/stderr or file size over the limit
    KILLED = "killed"  # killed by a signal for another reason


@dataclass
class Limits:
    """Resource limits for one job."""

    timeout_s: float = 5.0
    """Wall-clock limit; the whole process group is killed past it."""
    cpu_s: float | None = None
    """CPU-seconds limit (defaults to the wall-clock limit, rounded up)."""
    memory_mb: int = 512
    """Address-space (local) or cgroup memory (docker) limit."""
    max_processes: int = 32
    """Process/thread limit for the job's user (local) or pids limit (docker)."""
    max_output_bytes: int = 1_000_000
    """stdout and stderr are each truncated to this many bytes; exceeding it ends the job as OUTPUT_LIMIT."""
    max_file_mb: int = 16
    """Largest file the job may write."""
    max_open_files: int = 64

    def validate(self) -> None:
        for name in ("timeout_s", "memory_mb", "max_processes", "max_output_bytes", "max_file_mb", "max_open_files"):
            if getattr(self, name) <= 0:
                raise ValueError(f"sandbox limit {name} must be > 0, got {getattr(self, name)!r}")
        if self.cpu_s is not None and self.cpu_s <= 0:
            raise ValueError(f"sandbox limit cpu_s must be > 0, got {self.cpu_s!r}")


@dataclass
class Job:
    """A program to run: Python source (run as ``python3 main.py``) or an explicit command, plus files and stdin."""

    source: str | None = None
    """Python source; written to ``main.py`` in the work dir and run with the sandbox's Python."""
    command: Sequence[str] | None = None
    """Explicit argv (used instead of ``source``)."""
    args: Sequence[str] = ()
    """Extra argv for ``source`` jobs."""
    files: dict[str, str | bytes] = field(default_factory=dict)
    """Files to create in the work dir (relative paths)."""
    stdin: str | bytes = b""
    limits: Limits | None = None
    """Per-job limits; the sandbox's defaults when None."""

    def validate(self) -> None:
        if (self.source is None) == (self.command is None):
            raise ValueError("a sandbox Job needs exactly one of `source` or `command`")
        for name in self.files:
            if name.startswith("/") or ".." in name.split("/"):
                raise ValueError(f"sandbox Job file names must be relative and inside the work dir: {name!r}")
        if self.limits is not None:
            self.limits.validate()


@dataclass
class Result:
    """What a job did."""

    outcome: Outcome
    exit_code: int | None
    stdout: str
    stderr: str
    wall_s: float
    cpu_s: float | None = None
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.outcome is Outcome.OK


class Sandbox(ABC):
    """A backend that runs jobs in isolation. Use as a context manager to release workers/containers."""

    def __init__(self, limits: Limits | None = None, max_workers: int = 2):
        self.limits = limits or Limits()
        self.limits.validate()
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
