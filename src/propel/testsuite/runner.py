"""Run pristine pytest suites against model-written files in a sandbox: many submissions per job, one fork each.

``SuiteRunner.run(submissions)`` packs up to ``batch_size`` submissions into one sandbox job (``_runner.py``, with
pytest and coverage.py vendored as one zip), so pytest is imported once per batch instead of once per solution. Each
submission comes back as a ``SuiteRun``: per-test outcomes parsed here (the trainer's process) from the JUnit XML,
the exit code, coverage, and why it failed. Nothing a submission does raises: a batch whose job dies (a submission
that kills the runner) is rerun one submission per job, so only the culprit loses its grade.
"""

from __future__ import annotations

import base64
import json
import secrets
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources

from propel.sandbox.base import Job, Limits, Result, Sandbox
from propel.testsuite.junit import ReportError, parse_junit
from propel.testsuite.vendor import TRACER_NAME, ZIP_NAME, ctracer, testlib_zip

EXIT_MEANING = {
    0: "all tests passed",
    1: "some tests failed",
    2: "pytest was interrupted (collection errors)",
    3: "pytest internal error",
    4: "pytest usage error",
    5: "no tests collected",
}


@dataclass
class Submission:
    """What to grade: the model's files and the pristine tests, each ``{relative path: text}``."""

    files: dict[str, str]
    """The code under test (test files and pytest configuration already stripped)."""
    tests: dict[str, str]
    """The pristine suite, run from its own folder; must hold ``pytest.ini`` (``pristine_ini()``)."""


@dataclass
class SuiteRun:
    """One submission's run: ``status`` is ``ran`` when pytest finished with a report (exit code 0 or 1)."""

    status: str
    """``ran``, ``timeout``, ``killed``, ``pytest_exit`` (codes 2-5), ``no_report``, ``bad_report``, ``runner``."""
    reason: str
    tests: dict[str, str] = field(default_factory=dict)
    """Test name -> ``passed``/``failed``/``error``/``skipped`` (only when ``status == "ran"``)."""
    exit_code: int | None = None
    coverage: float | None = None
    """Percent of the code under test's statements the suite executed (0-100), None when unmeasured."""
    output_tail: str = ""
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ran"


def pristine_ini() -> str:
    """The only pytest configuration a graded run reads (written next to the pristine tests)."""
    return "[pytest]\naddopts =\npython_files = test_*.py\njunit_family = xunit1\n"


def runner_source() -> str:
    return resources.files("propel.testsuite").joinpath("_runner.py").read_text()


class SuiteRunner:
    """Grades submissions in a sandbox.

    Args:
        sandbox: any ``propel.sandbox.Sandbox`` (local or Docker).
        timeout_s: wall-clock limit per submission (the child is killed past it).
        memory_mb: address-space limit per submission.
        batch_size: submissions per sandbox job (jobs run in parallel over the sandbox's workers).
        max_file_mb: largest file (and output) a submission may write.
    """

    def __init__(
        self,
        sandbox: Sandbox,
        timeout_s: float = 10.0,
        memory_mb: int = 512,
        batch_size: int = 8,
        max_file_mb: int = 4,
    ) -> None:
        if timeout_s <= 0 or memory_mb < 64 or batch_size < 1 or max_file_mb < 1:
            raise ValueError(
                "SuiteRunner needs timeout_s > 0, memory_mb >= 64, batch_size >= 1, max_file_mb >= 1; got "
                f"{timeout_s}, {memory_mb}, {batch_size}, {max_file_mb}"
            )
        self.sandbox, self.timeout_s, self.memory_mb = sandbox, timeout_s, memory_mb
        self.batch_size, self.max_file_mb = batch_size, max_file_mb

    def run(self, submissions: Sequence[Submission]) -> list[SuiteRun]:
        batches = [list(submissions[i : i + self.batch_size]) for i in range(0, len(submissions), self.batch_size)]
        out: list[SuiteRun] = []
        for batch, (got, result) in zip(batches, self._run_batches(batches), strict=True):
            if got is None and len(batch) > 1:  # the job died: rerun one per job so only the culprit pays
                got = [g[0] if g else _runner_failed(r) for g, r in self._run_batches([[s] for s in batch])]
            out.extend(got if got is not None else [_runner_failed(result)])
        return out

    def _run_batches(self, batches: list[list[Submission]]) -> list[tuple[list[SuiteRun] | None, Result]]:
        jobs, tokens = [], []
        for batch in batches:
            job, token = self._job(batch)
            jobs.append(job)
            tokens.append(token)
        results = self.sandbox.run_many(jobs)
        return [(self._unpack(r, t, len(b)), r) for r, t, b in zip(results, tokens, batches, strict=True)]

    def _job(self, batch: list[Submission]) -> tuple[Job, str]:
        limits = {
            "timeout_s": self.timeout_s,
            "memory_mb": self.memory_mb,
            "max_file_bytes": self.max_file_mb << 20,
        }
        payload = {"limits": limits, "submissions": [{"files": s.files, "tests": s.tests} for s in batch]}
        token = secrets.token_hex(16)
        job_limits = Limits(
            timeout_s=10.0 + len(batch) * (self.timeout_s + 1.0),
            memory_mb=self.memory_mb + 512,
            max_processes=64,
            max_output_bytes=(400_000 * len(batch)) + 65_536,  # base64 of a report of up to 256 kB each
            max_file_mb=max(self.max_file_mb, 16),
        )
        files = {ZIP_NAME: testlib_zip(), "payload.json": json.dumps(payload)}
        tracer = ctracer()
        if tracer is not None:
            files[TRACER_NAME] = tracer
        return Job(source=runner_source(), files=files, stdin=token, limits=job_limits), token

    @staticmethod
    def _unpack(result, token: str, n: int) -> list[SuiteRun] | None:
        """The batch's runs from the job's framed stdout, or None when the job gave no frame (it died)."""
        raw = framed_records(result.stdout, token, n)
        return None if raw is None else [_suite_run(r) for r in raw]


def framed_records(stdout: str, token: str, n: int) -> list[dict] | None:
    """The ``n`` JSON records an in-sandbox runner printed between two ``token`` lines (the frame keeps the
    submission's own prints out), or None when there is no whole frame (the runner died)."""
    parts = stdout.split(token)
    if len(parts) != 3:
        return None
    try:
        raw = json.loads(parts[1])
    except json.JSONDecodeError:
        return None
    return raw if isinstance(raw, list) and len(raw) == n else None


def _runner_failed(result: Result) -> SuiteRun:
    how = f"{result.outcome.value}, exit code {result.exit_code}"
    return SuiteRun("runner", f"the grading job died before reporting ({how}): the submission killed its test runner")


def _signal_name(code: int | None) -> str:
    try:
        return signal.Signals(-int(code)).name
    except (TypeError, ValueError):
        return f"status {code}"


def runner_verdict(r: dict) -> tuple[str | None, str, dict, str]:
    """Read one suite's record from an in-sandbox runner: ``(status, reason, common, report)``. ``status`` is
    None when the suite ran to a JUnit report (``report``, for the caller to parse), else why it did not
    (``timeout``, ``killed``, ``pytest_exit``, ``no_report``); ``common`` holds exit code, output tail and wall time."""
    code, tail, wall = r.get("exit_code"), r.get("output_tail") or "", float(r.get("wall_s") or 0.0)
    common = {"exit_code": code, "output_tail": tail, "wall_s": wall}
    if r.get("timed_out"):
        return "timeout", "the test run exceeded its time limit", common, ""
    if code is None or code < 0:
        return "killed", f"the test process was killed by {_signal_name(code)} (memory, CPU, output)", common, ""
    if code not in (0, 1):
        meaning = EXIT_MEANING.get(code, "the process exited early (not pytest's own exit code)")
        return "pytest_exit", f"exit code {code}: {meaning}", common, ""
    try:
        report = base64.b64decode(r.get("report_b64") or "", validate=True).decode("utf-8", "replace")
    except (ValueError, TypeError):
        report = ""
    if not report:
        return "no_report", f"exit code {code} but no JUnit report: the suite did not run to its end", common, ""
    return None, "", common, report


def _suite_run(r: dict) -> SuiteRun:
    status, reason, common, report = runner_verdict(r)
    if status is not None:
        return SuiteRun(status, reason, **common)
    code = common["exit_code"]
    try:
        tests = parse_junit(report)
    except ReportError as e:
        return SuiteRun("bad_report", str(e), **common)
    coverage = None
    try:
        percent = json.loads(r.get("coverage") or "{}").get("percent")
        coverage = float(percent) if percent is not None else None
    except (ValueError, TypeError, AttributeError):
        coverage = None
    return SuiteRun("ran", EXIT_MEANING[code], tests=tests, coverage=coverage, **common)
