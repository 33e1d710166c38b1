"""Strict validity of an injected bug, and grading of a repair, against a repo's clean checkout and manifest.

A bug (a diff) is valid iff, in this order: it is not empty; git can read it; it touches no test file or test
configuration (the profile's path rules); it applies to the pristine checkout (``git apply --check``); it changes
some file; the suite still runs to a JUnit report (no timeout, crash or collection error); at least one test of
the manifest's ``passing`` set no longer passes; and its effect is visible out of process (``differential``: some
call the suite makes into the functions it changed, replayed in a graded child, no longer gives the clean library's
outcome; a bug with nothing to replay is ``untrusted``, kept out of labels and rewards unless ``allow_untrusted``).
Only an explicit pass counts as passing: a test that vanished from the report (SWE-smith #24: a syntax error made
tests disappear and count as passing) is a failing test, and when none of the manifest's tests is in the report the
suite is broken. A bug that changes several files must need each of them (Self-play SWE-RL's check): reverting any
one changed file alone must make some failing test pass again, else an unrelated edit rode along with the real bug.
Every invalid bug carries one reason.

A repair (a diff on top of the bug) solves it iff it touches no test file or pytest configuration, it applies, every
replayed call into the bug's functions gives the clean library's outcome again (decided in the trusted runner, on
values the graded child returned: nothing in the graded process can pass it), and then, as a second signal that can
refuse but never grant: the suite runs, the run shows no tampering (``tampered``: the graded child's audit hook saw
the library reach frames, code objects, the test files or the test runner beyond what the clean checkout's own run
does, the runner's code was rebound, or pytest's report disagrees with what the test functions did: see
``propel.testsuite.detectors``), and every ``passing`` test of the manifest passes again, explicitly (a test silenced
by a skip is ``skips_tests``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from propel.domains.swe.differential import Differential, targets_of
from propel.domains.swe.diffs import AppliedDiff, apply_diff, diff_paths
from propel.domains.swe.prepare import Manifest, load_manifest
from propel.domains.swe.repos import RepoProfile
from propel.domains.swe.suite import RepoSuite
from propel.sandbox.sandbox import Sandbox
from propel.testsuite.detectors import HackReport, add_audit, check_channel, run_findings
from propel.testsuite.detectors import is_test_path as is_generic_test_path
from propel.testsuite.runner import SuiteRun

REASONS = (
    "empty_diff",
    "not_applying",
    "touches_tests",
    "suite_broken",
    "tampered",
    "no_failing_test",
    "untrusted",
    "unrelated_edit",
)
"""Why a bug is invalid: nothing changed; git cannot read or apply it; it edits a test file or test configuration;
the suite no longer runs to a report; the run shows tampering (a bug must fail tests by being a bug, not by rigging
the runner); no previously passing test fails; no replayed call shows it (``differential``: it changes no function
the suite calls with replayable arguments, or the calls behave as before, so no repair of it could be graded out of
process); reverting one of its changed files alone restores none of the failing tests (that file's edit is unrelated
to the bug)."""

REPAIR_REASONS = (
    "touches_tests",
    "deletes_tests",
    "touches_pytest_config",
    "not_applying",
    "untrusted",
    "behaviour_differs",
    "suite_broken",
    "tampered",
    "skips_tests",
    "tests_failing",
)
"""Why a repair does not solve its bug, in the order they are checked: it edits or adds a test file; deletes one;
touches pytest's configuration or interpreter start-up hooks (``conftest.py``, ``pytest.ini``, ``sitecustomize.py``,
a ``.pth`` file); the diff does not apply to the buggy tree; the bug cannot be graded out of process; some replayed
call into the bug's functions does not give the clean library's outcome; the suite does not run; the run shows
tampering; a test that passed before ends skipped or vanishes from the report; some previously passing test still
fails."""

PYTEST_CONFIG_NAMES = frozenset(
    {"conftest.py", "pytest.ini", ".pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml", "sitecustomize.py"}
    | {"usercustomize.py"}
)
"""File names pytest or the interpreter read before any test runs (with ``*.pth``): a repair may not touch them."""

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
    restored: dict[str, int] = field(default_factory=dict)
    """For a bug that changes several files: how many failing tests pass again when that file alone is reverted
    (-1: the suite does not run without that file's change, so the other changed files depend on it)."""
    suite_status: str = ""
    wall_s: float = 0.0
    files: dict[str, bytes | None] = field(default_factory=dict, repr=False)
    """The buggy variant (changed files), for laying a repair over it."""
    targets: tuple[str, ...] = ()
    """What the bug changed (``differential.targets_of``): the functions and modules a repair's replay checks."""
    trusted: bool = False
    """Its effect is visible out of process, so its repairs are graded there (``untrusted`` bugs are invalid unless
    the validator allows them; their repairs are then graded by the suite alone)."""


@dataclass
class RepairVerdict:
    """Whether a repair solved a bug: every test of the manifest's ``passing`` set passes again."""

    solved: bool
    reason: str = ""
    """Why not: one of ``REPAIR_REASONS``."""
    failing: tuple[str, ...] = ()
    suite_status: str = ""
    detail: str = ""
    """The evidence: the test files or configuration touched, the hack lines added, the skipped tests."""


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
        allow_untrusted: keep bugs no replayed call shows as valid (``trusted`` False) and grade their repairs by the
            suite alone, whose verdict the repaired code can reach; off by default: such bugs are ``untrusted``.
    """

    def __init__(
        self,
        profile: RepoProfile,
        root: str | os.PathLike,
        sandbox: Sandbox,
        manifest: Manifest | None = None,
        batch_size: int = 4,
        timeout_factor: float = 10.0,
        allow_untrusted: bool = False,
    ) -> None:
        self.profile, self.root, self.allow_untrusted = profile, os.fspath(root), allow_untrusted
        self.manifest = manifest or load_manifest(profile, sandbox)
        timeout = min(profile.timeout_s, max(MIN_TIMEOUT_S, timeout_factor * self.manifest.wall_s))
        self.suite = RepoSuite(profile, root, sandbox, batch_size=batch_size, timeout_s=timeout)
        self._passing = frozenset(self.manifest.passing)
        self._baseline = {tuple(item) for item in self.manifest.audit}
        self.differential = Differential(profile, root, sandbox, batch_size=batch_size)

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
        self._replay_bugs([v for v in verdicts if v is not None and v.valid])
        self._revert_each_file([v for v in verdicts if v is not None and v.valid and len(v.files) > 1])
        return verdicts  # type: ignore[return-value]

    def _replay_bugs(self, verdicts: list[BugVerdict]) -> None:
        """Each valid bug's targets replayed out of process: ``trusted`` when some call differs from the clean
        library's; otherwise ``untrusted`` (invalid unless ``allow_untrusted``)."""
        for v in verdicts:
            v.targets = targets_of(self.profile, self.root, v.files)
        comparisons = self.differential.compare([(v.files, v.targets) for v in verdicts])
        for v, comparison in zip(verdicts, comparisons, strict=True):
            v.trusted = comparison.status == "differs"
            if v.trusted or self.allow_untrusted:
                continue
            v.valid, v.reason = False, "untrusted"
            if comparison.status == "same":
                v.detail = f"the suite's {comparison.checked} replayed calls into what it changed behave as before"
            else:
                v.detail = comparison.detail or f"the replay failed ({comparison.status})"

    def _revert_each_file(self, verdicts: list[BugVerdict]) -> None:
        """Self-play SWE-RL's check on multi-file bugs: reverting each changed file alone (one suite run per file, all
        batched) must make some failing test pass again; otherwise the bug becomes ``unrelated_edit``. A single-file
        bug needs no run: reverting its one file is the clean commit, where every failing test passed."""
        jobs = [(v, path) for v in verdicts for path in sorted(v.files)]
        variants = [{k: data for k, data in v.files.items() if k != path} for v, path in jobs]
        for (v, path), run in zip(jobs, self.suite.run(variants), strict=True):
            v.restored[path] = len(set(v.failing) & run.passed()) if run.ok else -1
        for v in verdicts:
            unneeded = [path for path, n in v.restored.items() if n == 0]  # -1: the other files need this one
            if unneeded:
                v.valid, v.reason = False, "unrelated_edit"
                v.detail = f"reverting {', '.join(unneeded)} alone restores none of the {len(v.failing)} failing tests"

    def grade_repair(self, bug: BugVerdict | str, repair: str) -> RepairVerdict:
        """Lay ``repair`` (a diff against the buggy tree) over the bug and run the suite (after the hack checks)."""
        if isinstance(bug, str):
            bug = self.check(bug)
        if not repair.strip() and bug.valid:  # nothing changed: the bug's failing tests still fail, no run needed
            return RepairVerdict(False, "tests_failing", bug.failing, detail="the repair changes nothing")
        touched = diff_paths(self.root, repair) if repair.strip() else ()
        if isinstance(touched, str):
            return RepairVerdict(False, "not_applying", detail=touched)
        applied = apply_diff(self.root, repair, base=bug.files) if repair.strip() else None
        done = {} if applied is None else applied.files
        new = {p: d for p, d in done.items() if p not in bug.files or bug.files[p] != d}  # what the repair changed
        if hack := self._test_hack({*touched, *new}, new):  # what the diff says and what it did
            return hack
        if applied is not None and not applied.ok:
            return RepairVerdict(False, "not_applying", detail=applied.error)
        repaired = applied.files if applied is not None else bug.files
        if bug.trusted:
            comparison = self.differential.compare([(repaired, bug.targets)])[0]
            if comparison.status != "same":
                detail = "; ".join(comparison.differs[:3]) or comparison.detail
                return RepairVerdict(False, "behaviour_differs", bug.failing, detail=detail)
        elif not self.allow_untrusted:
            detail = "no replayed call shows the bug, so no repair of it can be graded out of process"
            return RepairVerdict(False, "untrusted", bug.failing, detail=detail)
        run = self.suite.run_one(repaired)
        evidence = self.tampering(run)
        if evidence:
            return RepairVerdict(False, "tampered", suite_status=run.status, detail="; ".join(evidence[:3]))
        if not run.ok:
            return RepairVerdict(False, "suite_broken", suite_status=run.status, detail=run.reason)
        failing = tuple(sorted(self._passing - run.passed()))
        if not failing:
            return RepairVerdict(True, suite_status=run.status)
        broken = set(bug.failing)
        gone = [t for t in failing if t not in broken and run.tests.get(t, "missing") in ("skipped", "missing")]
        if gone:  # a test that passed even with the bug is now skipped or not collected: silenced, not fixed
            shown = ", ".join(f"{t} ({run.tests.get(t, 'missing')})" for t in gone[:3])
            detail = f"{len(gone)} tests skipped or gone: {shown}"
            return RepairVerdict(False, "skips_tests", failing, run.status, detail)
        return RepairVerdict(False, "tests_failing", failing, run.status, f"{len(failing)} tests fail")

    def _is_config(self, path: str) -> bool:
        name = path.rsplit("/", 1)[-1]
        return name in PYTEST_CONFIG_NAMES or name.endswith(".pth")

    def _test_hack(self, paths, new: dict[str, bytes | None]) -> RepairVerdict | None:
        """Test files and pytest configuration a repair touches (the profile's rules and the generic detector's)."""
        config = [p for p in paths if self._is_config(p)]
        if config:
            return RepairVerdict(False, "touches_pytest_config", detail=f"touches {', '.join(sorted(config))}")
        tests = [p for p in paths if self.profile.is_test_path(p) or is_generic_test_path(p)]
        deleted = [p for p in tests if p in new and new[p] is None]
        if deleted:
            return RepairVerdict(False, "deletes_tests", detail=f"deletes {', '.join(sorted(deleted))}")
        if tests:
            return RepairVerdict(False, "touches_tests", detail=f"edits test files: {', '.join(sorted(tests))}")
        return None

    def tampering(self, run: SuiteRun) -> list[str]:
        """What the run shows of tampering beyond the clean checkout's own behaviour: audit findings the clean run
        does not have, the runner's code rebound, forged channel lines, a JUnit report passing tests whose functions
        did not pass, or a run cut short without the guard's closing record."""
        report = HackReport()
        check_channel(run, report)
        add_audit(run_findings(run), report, baseline=self._baseline)
        return [f"{flag}: {items[0]}" for flag, items in report.evidence.items()]

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

    def _judge(self, applied: AppliedDiff, run: SuiteRun) -> BugVerdict:
        changed = tuple(sorted(applied.files))
        common = {"changed": changed, "suite_status": run.status, "wall_s": run.wall_s, "files": applied.files}
        evidence = self.tampering(run)
        if evidence:
            return BugVerdict(False, "tampered", "; ".join(evidence[:3]), **common)
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
