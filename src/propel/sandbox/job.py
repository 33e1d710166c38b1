"""The sandbox's contract in four types: a ``Job`` in, a ``Result`` with an ``Outcome`` out, under ``Limits``.

Verifiers run model-written code thousands of times per step: a crash, hang or hostile program must come back as an
``Outcome``, never as an exception in the trainer. Everything a backend, its worker pool, its protocol and its
sessions exchange is one of these.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from propel.errors import PropelError


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
    it first (``engines.tool_calls.check_arguments``) and shows the model why."""
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
