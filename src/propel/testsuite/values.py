"""Value grading: input -> expected-output tests judged where the graded code cannot reach.

A test such as ``assert candidate([1.0, 2.8], 0.3) == True`` or ``assert abs(candidate(x) - y) < 1e-6`` is run by
the in-sandbox runner (``propel_box.value_runner``) with ``candidate`` bound to a proxy: the graded child (a fresh
interpreter that never holds a test) computes ``candidate(*args)`` and sends the value back as plain data; the
runner evaluates the assertion on that value. An always-equal object, a patched test framework, a rewritten test
file or a forged report have nothing to act on: there is no pytest, no report and no test in the child's process or
on its disk. What can still win is a value equal to the expected one (solving the task, or hard-coding visible
examples, which ``detectors.check_hardcoded`` catches by its answers to inputs near them).

``ValueRunner.run(submissions)`` packs ``batch_size`` submissions per sandbox job. ``ValueRun`` carries per-test
outcomes (``passed``/``failed``/``error``), reasons, and the audit findings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from propel.sandbox.job import Limits, Result
from propel.sandbox.sandbox import Sandbox
from propel.testsuite.propel_box import codec
from propel.testsuite.runner import encode_files
from propel.testsuite.shipping import framed_records, graded_limits, job, job_limits


@dataclass
class ValueTests:
    """What value grading runs: the tests' code, with the task's own helpers, against a module's entry point."""

    tests: list[tuple[str, str]]
    """``(name, code)`` in order; the code calls ``candidate(...)`` and asserts on what it returns."""
    entry_point: str
    helpers: str = ""
    """The task's pristine prompt (helper functions a test may call, e.g. HumanEval's ``encode_cyclic``)."""
    preamble: str = ""
    """Statements every test starts with (imports, constants)."""
    module: str = "solution"


@dataclass
class ValueSubmission:
    files: dict[str, str]
    """The model's files (the module ``tests.module`` among them)."""
    tests: ValueTests
    calls: list[str] = field(default_factory=list)
    """Argument tuples as Python literals (``"([1, 2], 3)"``): the candidate's plain outputs on them come back in
    ``ValueRun.returned`` (the inputs near the visible ones, ``propel.testsuite.neighbours``)."""


@dataclass
class ValueRun:
    """One submission's value grading. ``status`` is ``ran`` unless the grading job itself died."""

    status: str
    reason: str = ""
    tests: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    audit: list[tuple[str, str, str, str]] = field(default_factory=list)
    returned: list = field(default_factory=list)
    """Per ``ValueSubmission.calls``: ``("value", tagged)`` (``codec``), ``("raise", name)`` or ``("error", why)``."""
    import_error: dict | None = None
    landlock: int = 0
    output_tail: str = ""
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ran"


class ValueRunner:
    """Grades submissions by value in a sandbox.

    Args:
        sandbox: any ``propel.sandbox.Sandbox``.
        timeout_s: wall-clock budget of one submission's calls (restarts of a dead child included).
        memory_mb: address-space limit of the graded process.
        batch_size: submissions per sandbox job.
        max_file_mb: largest file the graded process may write.
    """

    def __init__(
        self, sandbox: Sandbox, timeout_s: float = 10.0, memory_mb: int = 512, batch_size: int = 8, max_file_mb: int = 4
    ) -> None:
        if timeout_s <= 0 or memory_mb < 64 or batch_size < 1 or max_file_mb < 1:
            raise ValueError(
                "ValueRunner needs timeout_s > 0, memory_mb >= 64, batch_size >= 1, max_file_mb >= 1; got "
                f"{timeout_s}, {memory_mb}, {batch_size}, {max_file_mb}"
            )
        self.sandbox, self.timeout_s, self.memory_mb = sandbox, timeout_s, memory_mb
        self.batch_size, self.max_file_mb = batch_size, max_file_mb

    def run(self, submissions: Sequence[ValueSubmission]) -> list[ValueRun]:
        batches = [list(submissions[i : i + self.batch_size]) for i in range(0, len(submissions), self.batch_size)]
        out: list[ValueRun] = []
        for batch, (got, result) in zip(batches, self._run(batches), strict=True):
            if got is None and len(batch) > 1:  # the job died: one per job, so only the culprit pays
                got = [g[0] if g else _died(r) for g, r in self._run([[s] for s in batch])]
            out.extend(got if got is not None else [_died(result)])
        return out

    def _run(self, batches: list[list[ValueSubmission]]) -> list[tuple[list[ValueRun] | None, Result]]:
        jobs = [self._job(batch) for batch in batches]
        results = self.sandbox.run_many([j for j, _ in jobs])
        out = []
        for result, (_, token), batch in zip(results, jobs, batches, strict=True):
            raw = framed_records(result.stdout, token, len(batch))
            out.append((None if raw is None else [_read(r) for r in raw], result))
        return out

    def _job(self, batch: list[ValueSubmission]):
        child = Limits(
            timeout_s=self.timeout_s, memory_mb=self.memory_mb, max_file_mb=self.max_file_mb, max_processes=0
        )
        submissions = [
            {
                "files": encode_files(s.files),
                "module": s.tests.module,
                "entry": s.tests.entry_point,
                "helpers": s.tests.helpers,
                "preamble": s.tests.preamble,
                "tests": [list(t) for t in s.tests.tests],
                "calls": list(s.calls),
            }
            for s in batch
        ]
        payload = {"limits": graded_limits(child), "submissions": submissions}
        return job("value_runner", payload, job_limits(child, len(batch), per_item_s=2.0, output_per_item=200_000))


def _died(result: Result) -> ValueRun:
    how = f"{result.outcome.value}, exit code {result.exit_code}"
    return ValueRun("runner", f"the grading job died before reporting ({how}): the submission killed its runner")


def _returned(item) -> tuple:
    """One call's outcome, its value kept in the tagged form (compared as data) once ``codec.decode`` accepts it."""
    if not isinstance(item, list) or len(item) != 2 or item[0] not in ("value", "raise", "error"):
        return ("error", "malformed")
    if item[0] != "value":
        return (item[0], str(item[1])[:200])
    try:
        codec.decode(item[1])
    except (codec.BadValue, RecursionError) as e:
        return ("error", f"malformed value: {e}")
    return ("value", item[1])


def _read(r: dict) -> ValueRun:
    return ValueRun(
        "ran",
        tests=dict(r.get("tests") or {}),
        reasons=dict(r.get("reasons") or {}),
        audit=[tuple(a) for a in r.get("audit") or [] if len(a) == 4],
        returned=[_returned(x) for x in r.get("returned") or []],
        import_error=r.get("import_error") or None,
        landlock=int(r.get("landlock") or 0),
        output_tail=r.get("output_tail") or "",
        wall_s=float(r.get("wall_s") or 0.0),
    )
