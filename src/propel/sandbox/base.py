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
        """Raise ``TypeError``/``ValueError`` naming the field unless every limit is a finite number in range."""
        for name, (kind, top) in _LIMIT_RANGES.items():
            value = getattr(self, name)
            if name == "cpu_s" and value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, kind):
                want = "an int" if kind is int else "a number"
                raise TypeError(f"sandbox limit {name} must be {want}, got {type(value).__name__} {value!r}")
            if not (0 < value <= top):  # also rejects NaN
                raise ValueError(f"sandbox limit {name} must be > 0 and <= {top:g}, got {value!r}")


_REAL = (int, float)
_LIMIT_RANGES: dict[str, tuple[type | tuple[type, ...], float]] = {
    "timeout_s": (_REAL, 86_400.0),  # a day: beyond it the deadline arithmetic and select() timeouts misbehave
    "cpu_s": (_REAL, 86_400.0),
    "memory_mb": (int, float(1 << 24)),  # 16 TiB
    "max_processes": (int, float(1 << 22)),  # the kernel's pid_max ceiling
    "max_output_bytes": (int, float(1 << 30)),  # output is held in memory on both sides
    "max_file_mb": (int, float(1 << 24)),
    "max_open_files": (int, float(1 << 20)),  # the kernel's default nr_open
}


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
        """Raise ``TypeError``/``ValueError`` for a malformed job (a caller's mistake, not something the job does)."""
        if (self.source is None) == (self.command is None):
            raise ValueError("a sandbox Job needs exactly one of `source` or `command`")
        if self.source is not None and not isinstance(self.source, str):
            raise TypeError(f"sandbox Job source must be a str, got {type(self.source).__name__}")
        if self.command is not None:
            _check_argv("command", self.command)
            if not self.command:
                raise ValueError("sandbox Job command must name a program, got an empty list")
        _check_argv("args", self.args)
        if not isinstance(self.stdin, (str, bytes, bytearray)):
            raise TypeError(f"sandbox Job stdin must be str or bytes, got {type(self.stdin).__name__}")
        if not isinstance(self.files, dict):
            raise TypeError(f"sandbox Job files must be a dict of name -> data, got {type(self.files).__name__}")
        for name, data in self.files.items():
            check_file_name(name)
            if not isinstance(data, (str, bytes, bytearray)):
                raise TypeError(f"sandbox Job file {name!r} must be str or bytes, got {type(data).__name__}")
        names = set(self.files)
        if self.source is not None and "main.py" in names:
            raise ValueError("sandbox Job has both `source` and a file 'main.py' (the source is written there)")
        for name in names:
            parts = name.split("/")
            for i in range(1, len(parts)):
                if "/".join(parts[:i]) in names:
                    raise ValueError(f"sandbox Job file {name!r} needs {'/'.join(parts[:i])!r} to be a directory")
        if self.limits is not None:
            if not isinstance(self.limits, Limits):
                raise TypeError(f"sandbox Job limits must be a Limits, got {type(self.limits).__name__}")
            self.limits.validate()


def _check_argv(field_name: str, argv) -> None:
    """A list of str with no NUL byte: no argv can carry one (``execve`` ends each argument at it), so it is refused
    here, naming the argument, rather than failing inside the sandbox. A caller passing model-written text checks
    it first (``envs.tool_calls.check_arguments``) and shows the model why."""
    if isinstance(argv, (str, bytes)) or not isinstance(argv, Sequence):
        raise TypeError(f"sandbox Job {field_name} must be a list of str (not a str), got {argv!r}")
    for i, arg in enumerate(argv):
        if not isinstance(arg, str):
            raise TypeError(f"sandbox Job {field_name} items must be str, got {type(arg).__name__} {arg!r}")
        if "\x00" in arg:
            raise ValueError(f"sandbox Job {field_name}[{i}] contains a NUL byte (at {arg.index(chr(0))}): {arg!r:.80}")


def check_file_name(name) -> None:
    """A relative path of plain components ('a.txt', 'data/in.txt'): no '', '.', '..', trailing '/', NUL."""
    if not isinstance(name, str):
        raise TypeError(f"sandbox Job file names must be str, got {type(name).__name__} {name!r}")
    parts = name.split("/")
    if "\x00" in name or name.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ValueError(
            f"sandbox Job file names must be relative paths of plain components inside the work dir: {name!r}"
        )


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
