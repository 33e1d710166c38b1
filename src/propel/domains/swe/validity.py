"""Strict validity of an injected bug, and grading of a repair, against a repo's clean checkout and manifest.

A bug (a diff) is valid iff, in this order: it is not empty; git can read it; it touches no test file or test
configuration (the profile's path rules); it applies to the pristine checkout (``git apply --check``); it changes
some file; the suite still runs to a JUnit report (no timeout, crash or collection error); and at least one test of
the manifest's ``passing`` set no longer passes. Only an explicit pass counts as passing: a test that vanished from
the report (SWE-smith #24: a syntax error made tests disappear and count as passing) is a failing test, and when
none of the manifest's tests is in the report the suite is broken. Every invalid bug carries one reason.

A repair (a diff on top of the bug) solves it iff it touches no test file, applies, and every ``passing`` test of
the manifest passes again.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from propel.domains.swe.diffs import AppliedDiff, apply_diff, diff_paths
from propel.domains.swe.prepare import Manifest, load_manifest
from propel.domains.swe.repos import RepoProfile
from propel.domains.swe.suite import RepoSuite, SuiteResult
from propel.sandbox.base import Sandbox

REASONS = ("empty_diff", "not_applying", "touches_tests", "suite_broken", "no_failing_test")
"""Why a bug is invalid: nothing changed; git cannot read or apply it; it edits a test file or test configuration;
the suite no longer runs to a report; no previously passing test fails."""

MIN_TIMEOUT_S = 20.0
"""Shortest suite limit a bug gets, however fast the clean suite ran."""


@dataclass
class BugVerdict:
    """Whether a bug is valid, and what it does to the suite."""

    valid: bool
    reason: str | None = None
    """One of ``REASONS`` when invalid, else None."""
    detail: str = ""
    """A human-readable line: git's error, the test paths touched, the suite's status."""
    changed: tuple[str, ...] = ()
    """Files the diff changes."""
    failing: tuple[str, ...] = ()
    """Tests that passed on the clean commit and do not pass with the bug (the repair's fail-to-pass set)."""
    still_passing: int = 0
    """How many of the manifest's passing tests still pass."""
    suite_status: str = ""
    wall_s: float = 0.0
    files: dict[str, bytes | None] = field(default_factory=dict, repr=False)
    """The buggy variant (changed files), for laying a repair over it."""


@dataclass
class RepairVerdict:
    """Whether a repair solved a bug: every test of the manifest's ``passing`` set passes again."""

    solved: bool
    reason: str = ""
    """Why not: ``touches_tests``, ``not_applying``, ``suite_broken`` or ``tests_failing``."""
    failing: tuple[str, ...] = ()
    suite_status: str = ""


class BugValidator:
    """Checks bugs (and grades repairs) for one repo in a sandbox.

    Args:
        profile: the repo's profile.
        root: its clean checkout (``checkout(profile)``).
        sandbox: where the suite runs (``LocalSandbox`` or ``DockerSandbox``).
        manifest: the clean commit's passing tests; loaded (or preflighted in ``sandbox``) when None.
        batch_size: bugs per sandbox job in ``check_many``.
        timeout_factor: a bug's suite run may take this many times the clean run's preflight time (at least
            ``MIN_TIMEOUT_S``, at most the profile's ``timeout_s``): a bug that makes the suite hang costs seconds,
            not the profile's whole limit, and counts as ``suite_broken`` (a failing suite runs slower than a
            passing one: parse's clean run takes 1.9 s, a bug failing 85 tests 8 s, under load 15 s).
    """

    def __init__(
        self,
        profile: RepoProfile,
        root: str | os.PathLike,
        sandbox: Sandbox,
        manifest: Manifest | None = None,
        batch_size: int = 4,
        timeout_factor: float = 10.0,
    ) -> None:
        self.profile, self.root = profile, os.fspath(root)
        self.manifest = manifest or load_manifest(profile, sandbox)
        timeout = min(profile.timeout_s, max(MIN_TIMEOUT_S, timeout_factor * self.manifest.wall_s))
        self.suite = RepoSuite(profile, root, sandbox, batch_size=batch_size, timeout_s=timeout)
        self._passing = frozenset(self.manifest.passing)

    def check(self, diff: str) -> BugVerdict:
        return self.check_many([diff])[0]

    def check_many(self, diffs: Sequence[str]) -> list[BugVerdict]:
        """A verdict per diff; the diffs that pass the static checks share batched suite runs."""
        verdicts: list[BugVerdict | None] = []
        pending: list[tuple[int, AppliedDiff]] = []
        for i, diff in enumerate(diffs):
            verdict, applied = self._static(diff)
            verdicts.append(verdict)
            if verdict is None:
                pending.append((i, applied))
        runs = self.suite.run([applied.files for _, applied in pending])
        for (i, applied), run in zip(pending, runs, strict=True):
            verdicts[i] = self._judge(applied, run)
        return verdicts  # type: ignore[return-value]

    def grade_repair(self, bug: BugVerdict | str, repair: str) -> RepairVerdict:
        """Lay ``repair`` (a diff against the buggy tree) over the bug and run the suite."""
        if isinstance(bug, str):
            bug = self.check(bug)
        touched = diff_paths(self.root, repair) if repair.strip() else ()
        if isinstance(touched, str):
            return RepairVerdict(False, "not_applying")
        if any(self.profile.is_test_path(p) for p in touched):
            return RepairVerdict(False, "touches_tests")
        applied = apply_diff(self.root, repair, base=bug.files) if repair.strip() else None
        if applied is not None and not applied.ok:
            return RepairVerdict(False, "not_applying")
        if applied is not None and any(self.profile.is_test_path(p) for p in applied.files):
            return RepairVerdict(False, "touches_tests")
        run = self.suite.run_one(applied.files if applied is not None else bug.files)
        if not run.ok:
            return RepairVerdict(False, "suite_broken", suite_status=run.status)
        failing = tuple(sorted(self._passing - run.passed()))
        return RepairVerdict(not failing, "" if not failing else "tests_failing", failing, run.status)

    def _static(self, diff: str) -> tuple[BugVerdict | None, AppliedDiff | None]:
        if not diff.strip():
            return BugVerdict(False, "empty_diff", "the diff is empty"), None
        paths = diff_paths(self.root, diff)
        if isinstance(paths, str):
            return BugVerdict(False, "not_applying", paths), None
        tests = [p for p in paths if self.profile.is_test_path(p)]
        if tests:
            return BugVerdict(False, "touches_tests", f"edits test files: {', '.join(tests)}", paths), None
        applied = apply_diff(self.root, diff)
        if not applied.ok:
            return BugVerdict(False, "not_applying", applied.error, paths), None
        tests = [p for p in applied.files if self.profile.is_test_path(p)]  # what it did, not only what it says
        if tests:
            return BugVerdict(False, "touches_tests", f"edits test files: {', '.join(tests)}", paths), None
        if not applied.files:
            return BugVerdict(False, "empty_diff", "the diff changes no file's content", paths), None
        return None, applied

    def _judge(self, applied: AppliedDiff, run: SuiteResult) -> BugVerdict:
        changed = tuple(sorted(applied.files))
        common = {"changed": changed, "suite_status": run.status, "wall_s": run.wall_s, "files": applied.files}
        if not run.ok:
            return BugVerdict(False, "suite_broken", f"{run.status}: {run.reason}", **common)
        if not self._passing & set(run.tests):
            return BugVerdict(False, "suite_broken", "none of the clean commit's tests is in the report", **common)
        passed = run.passed()
        failing = tuple(sorted(self._passing - passed))
        still = len(self._passing & passed)
        if not failing:
            return BugVerdict(
                False, "no_failing_test", "every previously passing test still passes", **common, still_passing=still
            )
        return BugVerdict(True, None, f"{len(failing)} tests fail", failing=failing, still_passing=still, **common)
