"""Malformed jobs, limits and sandbox arguments fail at once with one clear error, and a
worker's answer for another job is never taken as this job's result."""

from __future__ import annotations

import json
import math
import time

import pytest

from propel.sandbox import Job, Limits, LocalSandbox
from propel.sandbox.protocol import Channel, WorkerLost, exchange


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"timeout_s": math.nan}, ValueError, "timeout_s"),
        ({"timeout_s": math.inf}, ValueError, "timeout_s"),
        ({"timeout_s": 1e300}, ValueError, "timeout_s"),
        ({"timeout_s": "5"}, TypeError, "timeout_s must be a number"),
        ({"timeout_s": None}, TypeError, "timeout_s"),
        ({"cpu_s": math.nan}, ValueError, "cpu_s"),
        ({"memory_mb": 256.5}, TypeError, "memory_mb must be an int"),
        ({"memory_mb": True}, TypeError, "memory_mb"),
        ({"max_processes": 10**12}, ValueError, "max_processes"),
        ({"max_output_bytes": 0}, ValueError, "max_output_bytes"),
    ],
)
def test_bad_limits(kwargs, error, match):
    with pytest.raises(error, match=match):
        Limits(**kwargs).validate()


@pytest.mark.parametrize(("workers", "error"), [(2.5, TypeError), ("2", TypeError), (True, TypeError), (0, ValueError)])
def test_bad_max_workers(workers, error):
    with pytest.raises(error, match="max_workers"):
        LocalSandbox(max_workers=workers, isolation="none")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"source": "print(1)", "stdin": 5}, TypeError, "stdin"),
        ({"source": "print(1)", "args": "abc"}, TypeError, "args"),
        ({"source": "print(1)", "args": [1]}, TypeError, "args"),
        ({"command": "ls"}, TypeError, "command"),
        ({"command": []}, ValueError, "command"),
        ({"source": b"print(1)"}, TypeError, "source"),
        ({"source": "print(1)", "files": {"main.py": "x"}}, ValueError, "main.py"),
        ({"source": "print(1)", "files": {"": "x"}}, ValueError, "file names"),
        ({"source": "print(1)", "files": {".": "x"}}, ValueError, "file names"),
        ({"source": "print(1)", "files": {"d/": "x"}}, ValueError, "file names"),
        ({"source": "print(1)", "files": {"a//b": "x"}}, ValueError, "file names"),
        ({"source": "print(1)", "files": {"a\x00b": "x"}}, ValueError, "file names"),
        ({"source": "print(1)", "files": {"../x": "x"}}, ValueError, "file names"),
        ({"source": "print(1)", "files": {"/etc/x": "x"}}, ValueError, "file names"),
        ({"source": "print(1)", "files": {"d": "x", "d/e": "y"}}, ValueError, "directory"),
        ({"source": "print(1)", "files": {"x": 5}}, TypeError, "file 'x'"),
        ({"source": "print(1)", "limits": {"timeout_s": 1}}, TypeError, "Limits"),
        ({"command": ["echo", "a\x00b"]}, ValueError, r"command\[1\] contains a NUL byte"),
        ({"command": ["ec\x00ho"]}, ValueError, r"command\[0\] contains a NUL byte"),
        ({"source": "print(1)", "args": ["ok", "x\x00"]}, ValueError, r"args\[1\] contains a NUL byte"),
    ],
)
def test_bad_jobs(kwargs, error, match):
    with pytest.raises(error, match=match):
        Job(**kwargs).validate()


def test_good_jobs_still_validate():
    Job(source="print(1)", args=("a",), files={"data/in.txt": b"x", "b.txt": "y"}, stdin=bytearray(b"z")).validate()
    Job(command=("sh", "-c", "true"), limits=Limits(timeout_s=0.5, cpu_s=1)).validate()


class _Replay(Channel):
    """A worker that answers with canned frames."""

    def __init__(self, *headers: dict):
        self.data = b"".join(len(raw).to_bytes(4, "big") + raw for raw in (json.dumps(h).encode() for h in headers))

    def send(self, data: bytes) -> None:
        pass

    def recv_exact(self, n: int, deadline: float) -> bytes:
        out, self.data = self.data[:n], self.data[n:]
        if len(out) < n:
            raise WorkerLost("worker closed its output")
        return out

    def close(self) -> None:
        pass


def test_an_answer_for_another_job_is_a_lost_worker():
    stale = {"event": "done", "id": -1, "outcome": "ok", "exit_code": 0, "out_n": 0, "err_n": 0}
    channel = _Replay({"event": "started", "id": -1, "pid": 7}, stale)
    start = time.monotonic()
    with pytest.raises(WorkerLost, match="out of step"):
        exchange(channel, Job(source="print(1)"), Limits())
    assert time.monotonic() - start < 1
