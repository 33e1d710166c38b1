"""The host side of the worker protocol: frame a job, read the worker's answer back into a ``Result``.

The worker (``_worker.py``) runs inside the sandbox, so everything it sends is treated as untrusted: JSON headers
only (never pickle), sizes checked against the limits, and any malformed frame ends the worker, not the trainer.
"""

from __future__ import annotations

import itertools
import json
import math
import struct
import time
from abc import ABC, abstractmethod

from propel.sandbox.job import Job, Limits, Outcome, Result

_LEN = struct.Struct(">I")
_MAX_HEADER = 1 << 16
_job_ids = itertools.count(1)
GRACE_S = 0.3
"""How long past a job's wall-clock limit, counted from the worker's ``started`` frame, the host waits for its result
before giving the worker up (so a job that stops its worker, or a stuck worker, returns within the limit + 0.5 s).
It only has to cover the worker killing the job and sending the result: the worker cleans up after sending it."""


class WorkerLost(Exception):
    """The worker died, hung past the guard deadline or broke the protocol; it must be replaced."""

    def __init__(self, message: str, timed_out: bool = False):
        super().__init__(message)
        self.timed_out = timed_out
        self.pid: int | None = None
        """The job's child pid, when the worker had started one (to clean up after it)."""


class Channel(ABC):
    """A byte stream to one worker process (a pipe pair locally, an exec socket in Docker)."""

    @abstractmethod
    def send(self, data: bytes) -> None:
        """Write all of ``data``; raise ``WorkerLost`` if the worker is gone."""

    @abstractmethod
    def recv_exact(self, n: int, deadline: float) -> bytes:
        """Read exactly ``n`` bytes before ``deadline`` (``time.monotonic``); raise ``WorkerLost`` otherwise."""

    @abstractmethod
    def close(self) -> None:
        """Kill the worker and everything it started."""

    def diagnostics(self) -> str:
        """The worker's own error output, for a clear message when it fails to start."""
        return ""


def resolved_limits(limits: Limits) -> dict:
    """The limits as the worker reads them, with the CPU limit defaulted from the wall-clock one."""
    cpu = limits.cpu_s if limits.cpu_s is not None else float(math.ceil(limits.timeout_s))
    return {
        "timeout_s": float(limits.timeout_s),
        "cpu_s": float(cpu),
        "memory_mb": int(limits.memory_mb),
        "max_processes": int(limits.max_processes),
        "max_output_bytes": int(limits.max_output_bytes),
        "max_file_mb": int(limits.max_file_mb),
        "max_open_files": int(limits.max_open_files),
    }


def _utf8(data: str | bytes) -> bytes:
    # surrogatepass: a lone surrogate in model-written text becomes bytes the job then fails on (a SyntaxError, an
    # error result), instead of a UnicodeEncodeError out of ``run()``
    return data.encode("utf-8", errors="surrogatepass") if isinstance(data, str) else bytes(data)


def encode_job(job: Job, limits: Limits, job_id: int = 0) -> bytes:
    """One job frame: JSON header (id, file names, argv, limits, blob sizes) followed by the file blobs and stdin."""
    files = {name: _utf8(data) for name, data in job.files.items()}
    if job.source is not None:
        files["main.py"] = _utf8(job.source)
    stdin = _utf8(job.stdin)
    names = list(files)
    blobs = [files[n] for n in names] + [stdin]
    header = {
        "id": job_id,
        "argv": [str(a) for a in job.command] if job.command is not None else None,
        "args": [str(a) for a in job.args],
        "files": names,
        "sizes": [len(b) for b in blobs],
        "limits": resolved_limits(limits),
    }
    raw = json.dumps(header).encode()
    return _LEN.pack(len(raw)) + raw + b"".join(blobs)


def read_header(channel: Channel, deadline: float) -> dict:
    """Read one JSON header frame from the worker."""
    (size,) = _LEN.unpack(channel.recv_exact(_LEN.size, deadline))
    if size > _MAX_HEADER:
        raise WorkerLost(f"worker sent a {size}-byte header (protocol broken)")
    try:
        header = json.loads(channel.recv_exact(size, deadline))
    except ValueError as e:
        raise WorkerLost(f"worker sent a malformed header: {e}") from e
    if not isinstance(header, dict):
        raise WorkerLost("worker sent a non-object header")
    return header


def exchange(channel: Channel, job: Job, limits: Limits, grace_s: float = GRACE_S) -> tuple[Result, int | None]:
    """Send one job and wait for its result; returns the result and the child's pid (host-visible or not).

    Every frame the worker sends back must carry this job's id: a frame for another job (a worker whose previous
    exchange was interrupted) is a broken protocol, never a result to hand out.
    """
    start = time.monotonic()
    job_id = next(_job_ids)
    channel.send(encode_job(job, limits, job_id))
    # Until ``started``, the worker writes the inputs (after finishing the last job's clean-up): not the job's time.
    started = _expect(channel, "started", job_id, time.monotonic() + limits.timeout_s + grace_s)
    pid = started.get("pid") if isinstance(started.get("pid"), int) else None
    deadline = time.monotonic() + limits.timeout_s + grace_s  # the job's clock starts when it is forked
    try:
        return _read_done(channel, limits, deadline, start, job_id), pid
    except WorkerLost as e:
        e.pid = pid
        raise


def _expect(channel: Channel, event: str, job_id: int, deadline: float) -> dict:
    header = read_header(channel, deadline)
    if header.get("event") != event:
        raise WorkerLost(f"worker sent {header.get('event')!r} instead of {event!r}")
    if header.get("id") != job_id:
        raise WorkerLost(f"worker answered job {header.get('id')!r} instead of job {job_id} (protocol out of step)")
    return header


def _read_done(channel: Channel, limits: Limits, deadline: float, start: float, job_id: int) -> Result:
    done = _expect(channel, "done", job_id, deadline)
    cap = limits.max_output_bytes
    try:
        out_n, err_n = int(done["out_n"]), int(done["err_n"])
        outcome = Outcome(done["outcome"])
    except (KeyError, TypeError, ValueError) as e:
        raise WorkerLost(f"worker sent a malformed result: {e}") from e
    if not (0 <= out_n <= cap and 0 <= err_n <= cap):
        raise WorkerLost("worker announced more output than the limit allows (protocol broken)")
    out = channel.recv_exact(out_n, deadline)
    err = channel.recv_exact(err_n, deadline)
    return Result(
        outcome=outcome,
        exit_code=done.get("exit_code") if isinstance(done.get("exit_code"), int) else None,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        wall_s=float(done.get("wall_s", time.monotonic() - start)),
        cpu_s=float(done["cpu_s"]) if isinstance(done.get("cpu_s"), (int, float)) else None,
        truncated=bool(done.get("truncated", False)),
    )


def lost_result(error: WorkerLost, wall_s: float) -> Result:
    """What a job gets when it took its worker down with it (killed its parent) or the worker hung."""
    outcome = Outcome.TIMEOUT if error.timed_out else Outcome.KILLED
    return Result(outcome=outcome, exit_code=None, stdout="", stderr=f"sandbox worker lost: {error}", wall_s=wall_s)
