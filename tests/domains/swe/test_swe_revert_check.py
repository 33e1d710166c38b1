"""Self-play SWE-RL's per-file revert check: a bug spread over several files must need each of them.

A real bug in ``parse.py`` plus an unrelated new file is invalid (``unrelated_edit``: reverting that file alone
restores no failing test); a bug whose two files depend on each other stays valid.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from propel.domains.swe.diffs import unified_diff
from propel.domains.swe.validity import REASONS, BugValidator

KNOWN = ("return self.converter(string)", "return self.converter(string[::-1])")


@pytest.fixture(scope="module")
def verdicts(swe_repo, sandbox):
    profile, root, manifest = swe_repo("parse")
    v = BugValidator(profile, root, sandbox, manifest=manifest)
    text = (Path(root) / "parse.py").read_text()
    assert KNOWN[0] in text
    bug = unified_diff("parse.py", text, text.replace(*KNOWN, 1))
    unrelated = unified_diff("parse_helpers.py", "", "HELPER = 1\n", new_file=True)
    helper = unified_diff("parse_helpers.py", "", "def backwards(s):\n    return s[::-1]\n", new_file=True)
    uses = text.replace(KNOWN[0], "return self.converter(backwards(string))", 1)
    uses = uses.replace("import logging\n", "import logging\n\nfrom parse_helpers import backwards\n", 1)
    diffs = {
        "alone": bug,
        "with_unrelated_file": bug + unrelated,
        "two_needed_files": unified_diff("parse.py", text, uses) + helper,
    }
    return dict(zip(diffs, v.check_many(list(diffs.values())), strict=True))


def test_a_bug_with_an_unrelated_file_is_flagged(verdicts):
    alone, mixed = verdicts["alone"], verdicts["with_unrelated_file"]
    assert alone.valid and alone.restored == {}  # one file: reverting it is the clean commit, no run needed
    assert not mixed.valid and mixed.reason == "unrelated_edit" and "unrelated_edit" in REASONS
    assert mixed.restored["parse_helpers.py"] == 0 and mixed.restored["parse.py"] == len(mixed.failing) > 0
    assert "parse_helpers.py" in mixed.detail and "parse.py," not in mixed.detail


def test_files_that_need_each_other_stay_valid(verdicts):
    both = verdicts["two_needed_files"]
    assert both.valid and both.changed == ("parse.py", "parse_helpers.py")
    assert both.restored["parse.py"] == len(both.failing) > 0
    assert both.restored["parse_helpers.py"] == -1  # without the helper the suite does not run: parse.py depends on it
