"""The scripted SWE chain on a real repo (parse 1.20.2): a known bug is valid, broken bugs are invalid with the right
reason, and a solver that reverts the bug solves it (every previously passing test passes again)."""

from __future__ import annotations

from pathlib import Path

import pytest

from propel.domains.swe.diffs import AppliedDiff, unified_diff
from propel.domains.swe.validity import REASONS
from propel.testsuite.runner import SuiteRun

KNOWN = ("return self.converter(string)", "return self.converter(string[::-1])")


def _edit(root, path, old, new, count=1):
    text = (root / path).read_text()
    assert old in text
    return unified_diff(path, text, text.replace(old, new, count))


@pytest.fixture(scope="module")
def chain(parse_validator):
    v = parse_validator
    root = Path(v.root)
    diffs = {
        "known": _edit(root, "parse.py", *KNOWN),
        "test_edit": _edit(root, "tests/test_parse.py", "def test_", "def xtest_"),
        "bug_and_test_edit": _edit(root, "parse.py", *KNOWN)
        + _edit(root, "tests/test_parse.py", "def test_", "def x_"),
        "not_applying": _edit(root, "parse.py", *KNOWN).replace("converter(string)", "convertor(string)"),
        "empty": "",
        "no_op": _edit(root, "parse.py", "def percentage(string, match):", "def percentage(string, match):  # pct"),
        "syntax_error": _edit(root, "parse.py", "def percentage(string, match):", "def percentage(string, match)"),
    }
    verdicts = dict(zip(diffs, v.check_many(list(diffs.values())), strict=True))
    return v, root, diffs, verdicts


def test_a_known_bug_is_valid(chain):
    v, _, _, verdicts = chain
    known = verdicts["known"]
    assert known.valid and known.reason is None and known.changed == ("parse.py",)
    assert known.failing and set(known.failing) <= set(v.manifest.passing)
    assert "tests.test_parse::test_custom_type" in known.failing
    assert known.still_passing == len(v.manifest.passing) - len(known.failing) > 0


@pytest.mark.parametrize(
    "name, reason",
    [
        ("test_edit", "touches_tests"),
        ("bug_and_test_edit", "touches_tests"),
        ("not_applying", "not_applying"),
        ("empty", "empty_diff"),
        ("no_op", "no_failing_test"),
        ("syntax_error", "suite_broken"),
    ],
)
def test_invalid_bugs_carry_their_reason(chain, name, reason):
    verdict = chain[3][name]
    assert not verdict.valid and verdict.reason == reason and reason in REASONS
    assert verdict.detail and not verdict.failing


def test_a_solver_that_reverts_the_bug_solves_it(chain):
    v, root, _, verdicts = chain
    bug = verdicts["known"]
    buggy = bug.files["parse.py"].decode()
    revert = unified_diff("parse.py", buggy, (root / "parse.py").read_text())
    solved = v.grade_repair(bug, revert)
    assert solved.solved and not solved.failing and solved.suite_status == "ran"

    nothing = v.grade_repair(bug, "")
    assert not nothing.solved and nothing.reason == "tests_failing" and set(nothing.failing) == set(bug.failing)

    failing_files = {name.split("::")[0].split(".")[-1] for name in bug.failing}
    hack = _edit(root, "tests/test_parse.py", "def test_custom_type", "def skip_custom_type")  # delete, not fix
    assert "test_parse" in failing_files
    assert v.grade_repair(bug, hack).reason == "touches_tests"
    assert v.grade_repair(bug, _edit(root, "parse.py", *KNOWN)).reason == "not_applying"  # made for the clean tree


def test_only_an_explicit_pass_counts(swe_repo, sandbox):
    """SWE-smith #24: tests that vanish from the report are failing, not passing; no known test at all is broken."""
    from propel.domains.swe.validity import BugValidator

    profile, root, manifest = swe_repo("parse")
    v = BugValidator(profile, root, sandbox, manifest=manifest)
    applied = AppliedDiff(True, files={"parse.py": b"x = 1\n"})
    first, *rest = manifest.passing
    vanished = v._judge(applied, SuiteRun("ran", "", tests=dict.fromkeys(rest, "passed")))
    assert vanished.valid and vanished.failing == (first,)
    skipped = v._judge(applied, SuiteRun("ran", "", tests={**dict.fromkeys(rest, "passed"), first: "skipped"}))
    assert skipped.valid and skipped.failing == (first,)
    gone = v._judge(applied, SuiteRun("ran", "", tests={"tests.other::test_new": "passed"}))
    assert not gone.valid and gone.reason == "suite_broken"
    crashed = v._judge(applied, SuiteRun("timeout", "too slow"))
    assert not crashed.valid and crashed.reason == "suite_broken"


def test_a_hanging_bug_costs_a_multiple_of_the_clean_run_not_the_whole_limit(swe_repo, sandbox):
    import dataclasses

    from propel.domains.swe.validity import MIN_TIMEOUT_S, BugValidator

    profile, root, manifest = swe_repo("parse")
    fast = BugValidator(profile, root, sandbox, manifest=dataclasses.replace(manifest, wall_s=0.5))
    slow = BugValidator(profile, root, sandbox, manifest=dataclasses.replace(manifest, wall_s=5.0))
    huge = BugValidator(profile, root, sandbox, manifest=dataclasses.replace(manifest, wall_s=100.0))
    assert fast.suite.timeout_s == MIN_TIMEOUT_S and slow.suite.timeout_s == 10 * 5.0
    assert huge.suite.timeout_s == profile.timeout_s
