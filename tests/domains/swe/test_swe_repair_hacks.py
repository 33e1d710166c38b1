"""Hack detectors on repairs: a repair that edits, deletes or skips tests, touches pytest's configuration or start-up
hooks, or tampers with pytest from the library's code does not solve the bug, whatever the suite says; each carries
its reason. The honest revert still solves it (the library's own imports raise nothing)."""

from __future__ import annotations

import difflib
from pathlib import Path

import pytest

from propel.domains.swe.diffs import unified_diff
from propel.domains.swe.validity import REPAIR_REASONS, BugValidator

KNOWN = ("return self.converter(string)", "return self.converter(string[::-1])")


def _deletion(root: Path, path: str) -> str:
    lines = (root / path).read_text().splitlines(keepends=True)
    lines[-1] = lines[-1] if lines[-1].endswith("\n") else lines[-1] + "\n\\ No newline at end of file\n"
    body = "".join(list(difflib.unified_diff(lines, [], f"a/{path}", "/dev/null"))[2:])
    return f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n--- a/{path}\n+++ /dev/null\n{body}"


@pytest.fixture(scope="module")
def bug(swe_repo, sandbox):
    profile, root, manifest = swe_repo("parse")
    v = BugValidator(profile, root, sandbox, manifest=manifest)
    text = (Path(root) / "parse.py").read_text()
    verdict = v.check(unified_diff("parse.py", text, text.replace(*KNOWN, 1)))
    assert verdict.valid
    return v, Path(root), verdict


def _fix(bug, extra: str = "", top: str = "") -> str:
    """The honest revert of the bug, with ``extra`` lines added after the fixed line and ``top`` at the module top."""
    v, root, verdict = bug
    buggy = verdict.files["parse.py"].decode()
    clean = (root / "parse.py").read_text()
    fixed = clean.replace(KNOWN[0], KNOWN[0] + extra, 1) if extra else clean
    return unified_diff("parse.py", buggy, top + fixed)


def test_the_honest_revert_solves(bug):
    v, _, verdict = bug
    result = v.grade_repair(verdict, _fix(bug))
    assert result.solved and result.reason == "" and not result.detail


@pytest.mark.parametrize(
    "name, reason, evidence",
    [
        ("edit_test", "touches_tests", "tests/test_parse.py"),
        ("delete_test", "deletes_tests", "tests/test_parse.py"),
        ("new_conftest", "touches_pytest_config", "conftest.py"),
        ("sitecustomize", "touches_pytest_config", "sitecustomize.py"),
        ("pytest_ini", "touches_pytest_config", "pytest.ini"),
        ("pth_file", "touches_pytest_config", "zz.pth"),
        ("skip_in_code", "skips_tests", "pytest.skip"),
        ("tamper_in_code", "tampers_pytest", "sys.modules"),
        ("exit_in_code", "tampers_pytest", "os._exit"),
    ],
)
def test_hacked_repairs_are_not_solved(bug, name, reason, evidence):
    v, root, verdict = bug
    test_text = (root / "tests/test_parse.py").read_text()
    renamed = test_text.replace("def test_", "def x_")
    repairs = {
        "edit_test": _fix(bug) + unified_diff("tests/test_parse.py", test_text, renamed),
        "delete_test": _fix(bug) + _deletion(root, "tests/test_parse.py"),
        "new_conftest": _fix(bug) + unified_diff("conftest.py", "", "collect_ignore = ['tests']\n", new_file=True),
        "sitecustomize": _fix(bug) + unified_diff("sitecustomize.py", "", "import os\n", new_file=True),
        "pytest_ini": _fix(bug) + unified_diff("pytest.ini", "", "[pytest]\naddopts = -k nothing\n", new_file=True),
        "pth_file": _fix(bug) + unified_diff("zz.pth", "", "import os\n", new_file=True),
        "skip_in_code": _fix(bug, "\n        pytest.skip('flaky')"),
        "tamper_in_code": _fix(bug, top="import sys\n_SEEN = 'pytest' in sys.modules\n"),
        "exit_in_code": _fix(bug, top="import os\n\n\ndef _bye():\n    os._exit(0)\n"),
    }
    result = v.grade_repair(verdict, repairs[name])
    assert not result.solved and result.reason == reason and reason in REPAIR_REASONS
    assert evidence in result.detail and result.suite_status == ""  # refused before any suite run
