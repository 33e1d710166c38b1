"""Run pristine pytest suites against model-written code in a sandbox, hardened: many suites per job, one fork each.

``SuiteRunner.run(submissions)`` packs up to ``batch_size`` submissions into one sandbox job (``propel_box``'s
``pytest_runner``, with pytest vendored as one zip), so pytest is imported once per batch. Each comes
back as a ``SuiteRun`` (``read_suite_record``, shared with the SWE domain's repository suites): the per-test outcomes
the graded child's guard reported over the authenticated channel (the trusted account), the JUnit XML's outcomes
(pytest's report, kept to cross-check), the audit findings, the runner code rebound during the run, forged channel
lines and the exit code. Nothing a submission does raises: a batch whose job dies (a submission that
kills the runner) is rerun one submission per job, so only the culprit loses its grade.
"""

from __future__ import annotations

import base64
import re
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field

from propel.sandbox.job import Limits, Result
from propel.sandbox.sandbox import Sandbox
from propel.testsuite.junit import ReportError, parse_junit
from propel.testsuite.shipping import framed_records, graded_limits, job, job_limits

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
    """One suite's run. ``status`` is ``ran`` when pytest finished (exit code 0 or 1) with its guard's closing record.

    ``tests`` is the guard's account (``classname::name`` -> ``passed``/``failed``/``error``/``skipped``): what the
    test functions did, recorded before any report was built. ``report_tests`` is what the JUnit XML says; the two
    disagreeing is evidence of a tampered report (``detectors.check_run``)."""

    status: str
    """``ran``, ``timeout``, ``killed``, ``pytest_exit`` (codes 2-5), ``no_report``, ``bad_report``, ``runner``."""
    reason: str
    tests: dict[str, str] = field(default_factory=dict)
    report_tests: dict[str, str] = field(default_factory=dict)
    exit_code: int | None = None
    output_tail: str = ""
    wall_s: float = 0.0
    audit: list[tuple[str, str, str, str]] = field(default_factory=list)
    """``(flag, event, where, detail)``: what the audit hook saw graded code do."""
    tampered: list[str] = field(default_factory=list)
    """The runner's code rebound during the run (``"_pytest.reports.TestReport.__init__ rebound"``)."""
    forged: int = 0
    """Lines on the result channel that the guard did not write."""
    ended: bool = False
    """The guard's closing record arrived (pytest ran to the end of its session)."""
    collected: list[str] | None = None
    landlock: int = 0
    """The Landlock ABI the child confined itself with (0: the kernel has none)."""

    @property
    def ok(self) -> bool:
        return self.status == "ran"

    def passed(self) -> set[str]:
        """Ids of the tests with an explicit pass (a test missing from the account did not pass)."""
        return {name for name, outcome in self.tests.items() if outcome == "passed"}

    def by_name(self) -> dict[str, str]:
        """``{name: outcome}`` without the class part (suites whose test names are unique)."""
        return {key.rsplit("::", 1)[-1]: outcome for key, outcome in self.tests.items()}


def pristine_ini() -> str:
    """The only pytest configuration a graded HumanEval-style run reads (written next to the pristine tests)."""
    return "[pytest]\naddopts =\npython_files = test_*.py\njunit_family = xunit1\n"


def _signal_name(code: int | None) -> str:
    try:
        return signal.Signals(-int(code)).name
    except (TypeError, ValueError):
        return f"status {code}"


_AUTO_ID = re.compile(r"(?<=[\[-])([A-Za-z_]\w*?)\d+(?=[-\]])")
_RANK = {"passed": 0, "skipped": 1, "failed": 2, "error": 3}


def stable_test_id(test_id: str) -> str:
    """A test id without pytest's positional auto-ids (``test_format[4-19-expected19-%C]`` ->
    ``test_format[4-19-expected#-%C]``): the index pytest gives a parameter it cannot render follows the order of the
    parameter list, which a suite may build from a set (isodate's test cases, a tuple with ``None``: its hash, and so
    the order, changes with every process), so the same test would have another id in the next run."""
    head, bracket, rest = test_id.partition("[")
    return head + _AUTO_ID.sub(r"\1#", bracket + rest) if bracket else test_id


def stable_outcomes(outcomes: dict[str, str]) -> dict[str, str]:
    """Outcomes keyed by ``stable_test_id``; tests whose stable ids coincide count as one, passed only when all of
    them passed (the worst outcome wins)."""
    out: dict[str, str] = {}
    for test_id, outcome in outcomes.items():
        key = stable_test_id(test_id)
        if key not in out or _RANK.get(outcome, 3) > _RANK.get(out[key], 3):
            out[key] = outcome
    return out


def read_suite_record(r: dict) -> SuiteRun:
    """One suite's record from ``propel_box.pytest_runner`` as a ``SuiteRun``."""
    code, tail, wall = r.get("exit_code"), r.get("output_tail") or "", float(r.get("wall_s") or 0.0)
    ch = r.get("channel") or {}
    common = {
        "exit_code": code,
        "output_tail": tail,
        "wall_s": wall,
        "audit": [tuple(a) for a in ch.get("audit") or [] if len(a) == 4],
        "tampered": [t[1] for t in ch.get("tampered") or [] if len(t) == 2],
        "forged": int(ch.get("forged") or 0),
        "ended": ch.get("end") is not None,
        "collected": ch.get("collected"),
        "landlock": int(ch.get("landlock") or 0),
        "tests": stable_outcomes(dict(ch.get("tests") or {})),
    }
    if r.get("timed_out"):
        return SuiteRun("timeout", "the test run exceeded its time limit", **common)
    if code is None or code < 0:
        return SuiteRun(
            "killed", f"the test process was killed by {_signal_name(code)} (memory, CPU, output)", **common
        )
    if code not in (0, 1):
        meaning = EXIT_MEANING.get(code, "the process exited early (not pytest's own exit code)")
        return SuiteRun("pytest_exit", f"exit code {code}: {meaning}", **common)
    if not common["ended"]:
        return SuiteRun(
            "no_report", f"exit code {code} but the run's guard never closed: it did not run to its end", **common
        )
    try:
        report = base64.b64decode(r.get("report_b64") or "", validate=True).decode("utf-8", "replace")
    except (ValueError, TypeError):
        report = ""
    try:
        report_tests = stable_outcomes(parse_junit(report, keys="id")) if report else {}
    except ReportError as e:
        return SuiteRun("bad_report", str(e), **common)
    return SuiteRun("ran", EXIT_MEANING[code], report_tests=report_tests, **common)


def runner_failed(result: Result) -> SuiteRun:
    how = f"{result.outcome.value}, exit code {result.exit_code}"
    return SuiteRun("runner", f"the grading job died before reporting ({how}): the submission killed its test runner")


class SuiteRunner:
    """Grades submissions (HumanEval-style pristine tests in their own folder) in a sandbox.

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
                got = [g[0] if g else runner_failed(r) for g, r in self._run_batches([[s] for s in batch])]
            out.extend(got if got is not None else [runner_failed(result)])
        return out

    def _run_batches(self, batches: list[list[Submission]]) -> list[tuple[list[SuiteRun] | None, Result]]:
        jobs = [self._job(batch) for batch in batches]
        results = self.sandbox.run_many([j for j, _ in jobs])
        return [(_unpack(r, token, len(b)), r) for r, (_, token), b in zip(results, jobs, batches, strict=True)]

    def _job(self, batch: list[Submission]):
        child = Limits(
            timeout_s=self.timeout_s, memory_mb=self.memory_mb, max_file_mb=self.max_file_mb, max_processes=0
        )
        suites = [
            {
                "files": encode_files(s.files),
                "tests": encode_files(s.tests),
                "args": ["-c", "{tests}/pytest.ini", "--rootdir", "{tests}", "--confcutdir", "{tests}", "{tests}"],
                "hide_tests": True,
            }
            for s in batch
        ]
        limits = job_limits(child, len(batch), per_item_s=1.0, output_per_item=400_000)
        return job("pytest_runner", {"limits": graded_limits(child), "suites": suites}, limits, pytest=True)


def encode_files(files: dict[str, str | bytes | None]) -> dict[str, str | None]:
    """Files as the in-sandbox runners take them (base64, None to delete)."""
    return {
        k: None if v is None else base64.b64encode(v.encode() if isinstance(v, str) else v).decode("ascii")
        for k, v in files.items()
    }


def _unpack(result: Result, token: str, n: int) -> list[SuiteRun] | None:
    raw = framed_records(result.stdout, token, n)
    return None if raw is None else [read_suite_record(r) for r in raw]
