"""Run a repo's own test suite in a sandbox, on the clean checkout or on variants of it (a bug, a bug plus a fix).

``RepoSuite.run(variants)`` packs up to ``batch_size`` variants into one sandbox job (``_suite_runner.py`` with the
vendored pytest zip), so pytest is imported once per batch. Each variant comes back as a ``SuiteResult`` whose
``tests`` map every test id (``classname::name`` from the JUnit XML, parsed here in the trainer) to its outcome.
Nothing a variant does raises: a crash, hang or broken report is a status.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources

from propel.domains.swe.checkout import repo_files
from propel.domains.swe.repos import RepoProfile
from propel.sandbox.base import Job, Limits, Sandbox
from propel.testsuite.junit import ReportError, parse_junit
from propel.testsuite.runner import EXIT_MEANING, framed_records, runner_verdict
from propel.testsuite.vendor import ZIP_NAME, testlib_zip

Variant = Mapping[str, "bytes | str | None"]
"""Files that differ from the clean checkout: ``{relative path: new content}``, ``None`` to delete the file."""


@dataclass
class SuiteResult:
    """One run of the suite: ``status`` is ``ran`` when pytest finished with a report (exit code 0 or 1)."""

    status: str
    """``ran``, ``timeout``, ``killed``, ``pytest_exit`` (codes 2-5: collection errors, nothing collected),
    ``no_report``, ``bad_report`` or ``runner`` (the job died)."""
    reason: str
    tests: dict[str, str] = field(default_factory=dict)
    """Test id -> ``passed``/``failed``/``error``/``skipped`` (only when ``status == "ran"``)."""
    exit_code: int | None = None
    output_tail: str = ""
    wall_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ran"

    def passed(self) -> set[str]:
        """Ids of the tests with an explicit pass (a test missing from the report did not pass)."""
        return {name for name, outcome in self.tests.items() if outcome == "passed"}


def junit_ids(text: str) -> dict[str, str]:
    """``{classname::name: outcome}`` of every testcase (``parse_junit`` keys by name alone, which repeats across a
    repo's test modules); a name seen twice keeps its worst outcome. Raises ``ReportError`` like ``parse_junit``."""
    parse_junit(text)  # the same refusals (DOCTYPE, malformed XML, wrong root)
    rank = {"passed": 0, "failed": 1, "error": 2, "skipped": 3}
    out: dict[str, str] = {}
    for case in ET.fromstring(text).iter("testcase"):
        name = case.get("name")
        if not name:
            continue
        key = f"{case.get('classname') or ''}::{name}"
        tags = {child.tag for child in case}
        outcome = next((o for o in ("error", "failure", "skipped") if o in tags), "passed")
        outcome = "failed" if outcome == "failure" else outcome
        if key not in out or rank[outcome] > rank[out[key]]:
            out[key] = outcome
    return out


class RepoSuite:
    """Runs one repo's suite on variants of its clean checkout in a sandbox.

    Args:
        profile: the repo's profile (test paths, python path, timeout).
        root: the clean checkout (``checkout(profile)``).
        sandbox: any ``propel.sandbox.Sandbox`` (local or Docker).
        memory_mb: address-space limit of one suite run.
        batch_size: variants per sandbox job (jobs run in parallel over the sandbox's workers).
        timeout_s: wall-clock limit of one suite run (default: the profile's).
    """

    def __init__(
        self,
        profile: RepoProfile,
        root: str | os.PathLike,
        sandbox: Sandbox,
        memory_mb: int = 1024,
        batch_size: int = 4,
        timeout_s: float | None = None,
    ) -> None:
        self.timeout_s = float(timeout_s if timeout_s is not None else profile.timeout_s)
        if memory_mb < 128 or batch_size < 1 or self.timeout_s <= 0:
            raise ValueError(
                f"RepoSuite needs memory_mb >= 128, batch_size >= 1 and timeout_s > 0, got {memory_mb}, {batch_size}, "
                f"{self.timeout_s}"
            )
        self.profile, self.root, self.sandbox = profile, os.fspath(root), sandbox
        self.memory_mb, self.batch_size = memory_mb, batch_size
        self._files = {f"repo/{name}": data for name, data in repo_files(root).items()}

    def run(self, variants: Sequence[Variant]) -> list[SuiteResult]:
        """One ``SuiteResult`` per variant, in order (``{}`` runs the clean checkout)."""
        batches = [list(variants[i : i + self.batch_size]) for i in range(0, len(variants), self.batch_size)]
        jobs, tokens = zip(*(self._job(batch) for batch in batches), strict=True) if batches else ((), ())
        out: list[SuiteResult] = []
        for batch, token, result in zip(batches, tokens, self.sandbox.run_many(list(jobs)), strict=True):
            got = _unpack(result.stdout, token, len(batch))
            if got is None:
                how = f"{result.outcome.value}, exit code {result.exit_code}: {result.stderr[-500:]}"
                got = [SuiteResult("runner", f"the suite job died before reporting ({how})")] * len(batch)
            out.extend(got)
        return out

    def run_one(self, variant: Variant | None = None) -> SuiteResult:
        return self.run([variant or {}])[0]

    def _job(self, batch: list[Variant]) -> tuple[Job, str]:
        encoded = [
            {
                k: None if v is None else base64.b64encode(v.encode() if isinstance(v, str) else v).decode()
                for k, v in variant.items()
            }
            for variant in batch
        ]
        payload = {
            "variants": encoded,
            "limits": {"timeout_s": self.timeout_s, "memory_mb": self.memory_mb},
            "python_path": list(self.profile.python_path),
            "test_paths": list(self.profile.test_paths),
            "pytest_args": list(self.profile.pytest_args),
        }
        token = secrets.token_hex(16)
        limits = Limits(
            timeout_s=15.0 + len(batch) * (self.timeout_s + 2.0),
            memory_mb=self.memory_mb + 512,
            max_processes=64,
            max_output_bytes=len(batch) * 3_000_000 + 65_536,
            max_file_mb=64,
            max_open_files=256,
        )
        files = {**self._files, ZIP_NAME: testlib_zip(), "payload.json": json.dumps(payload)}
        return Job(source=_runner_source(), files=files, stdin=token, limits=limits), token


def _runner_source() -> str:
    return resources.files("propel.domains.swe").joinpath("_suite_runner.py").read_text()


def _unpack(stdout: str, token: str, n: int) -> list[SuiteResult] | None:
    raw = framed_records(stdout, token, n)
    return None if raw is None else [_result(r) for r in raw]


def _result(r: dict) -> SuiteResult:
    status, reason, common, report = runner_verdict(r)
    if status is not None:
        return SuiteResult(status, reason, **common)
    try:
        tests = junit_ids(report)
    except ReportError as e:
        return SuiteResult("bad_report", str(e), **common)
    return SuiteResult("ran", EXIT_MEANING[common["exit_code"]], tests=tests, **common)
