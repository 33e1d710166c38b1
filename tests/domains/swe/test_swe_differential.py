"""Differential grading on a real repository (parse 1.20.2): the suite's calls into what a bug changed are recorded on
the clean library in a trusted run, validated by replaying them on the clean library, and replayed on a variant in a
graded child that holds no test and no expected outcome. The clean library and an honest revert replay the same;
the bug, and a "repair" that keeps the bug while exiting, lying about equality or returning what the suite asserts,
differ; a module-level change shows in the module's data globals; a change nothing replays is ``untrusted``."""

from __future__ import annotations

from pathlib import Path

import pytest

from propel.domains.swe.differential import STATE, Differential, changed_functions, module_name, targets_of

KNOWN = ("return self.converter(string)", "return self.converter(string[::-1])")


def test_what_a_change_targets():
    before = "X = 1\n\n\ndef f(a):\n    return a\n\n\nclass C:\n    def m(self):\n"
    before += "        def inner():\n            return 1\n"
    after = before.replace("return 1", "return 2").replace("X = 1", "X = 2")
    assert changed_functions(before, after) == ["C.m"]  # the nested function belongs to its method
    assert changed_functions(before, before.replace("def f(a):\n    return a", "")) == ["f"]  # removed
    assert changed_functions("def (", after) == []


def test_module_names_follow_the_import_paths(swe_repo):
    parse, _, _ = swe_repo("parse")
    isodate, _, _ = swe_repo("isodate")
    assert module_name(parse, "parse.py") == "parse" and module_name(parse, "tests/test_parse.py") is None
    assert module_name(isodate, "src/isodate/duration.py") == "isodate.duration"
    assert module_name(isodate, "src/isodate/__init__.py") == "isodate" and module_name(isodate, "README.rst") is None


@pytest.fixture(scope="module")
def parse_diff(swe_repo, sandbox, tmp_path_factory):
    profile, root, _ = swe_repo("parse")
    cache = tmp_path_factory.mktemp("recordings")
    return profile, Path(root), Differential(profile, root, sandbox, cache=cache), cache


def _variant(root: Path, *edits: tuple[str, str]) -> dict[str, bytes]:
    text = (root / "parse.py").read_text()
    for old, new in edits:
        assert old in text
        text = text.replace(old, new, 1)
    return {"parse.py": text.encode()}


def test_recordings_are_validated_on_the_clean_library_and_cached(parse_diff, sandbox):
    profile, root, diff, cache = parse_diff
    bug = _variant(root, KNOWN)
    targets = targets_of(profile, root, bug)
    assert targets == ("parse:convert_first.__call__", f"parse:{STATE}")
    recordings = diff.recordings(targets)
    calls, state = recordings[targets[0]], recordings[targets[1]]
    assert 0 < len(calls.checks) <= calls.recorded and all(c["kind"] == "call" for c in calls.checks)
    assert len(state.checks) > 5 and all(c["kind"] == "state" for c in state.checks)
    assert len(list(Path(cache).rglob("*.json"))) == 2
    again = Differential(profile, root, sandbox, cache=cache).recordings(targets)  # read back, not re-recorded
    assert again[targets[0]].checks == calls.checks


def test_clean_and_reverted_replay_the_same_the_bug_differs(parse_diff):
    profile, root, diff, _ = parse_diff
    bug = _variant(root, KNOWN)
    targets = targets_of(profile, root, bug)
    clean, buggy, reverted = diff.compare([({}, targets), (bug, targets), (_variant(root), targets)])
    assert clean.status == "same" and clean.checked > 0 and clean.landlock > 0
    assert buggy.status == "differs" and "convert_first.__call__" in buggy.differs[0]
    assert reverted.status == "same"


REPAIRS = {
    "exits at import": ("import re\n", "import re\nimport os\nos._exit(0)\n"),
    "raises SystemExit in the function": (KNOWN[1], "raise SystemExit(0)"),
    "always-equal result": (
        KNOWN[1],
        "return type('Any', (), {'__eq__': lambda s, o: True, '__ne__': lambda s, o: False})()",
    ),
    "detects the grader, keeps the bug": (
        KNOWN[1],
        "import sys\n        if 'pytest' not in sys.modules:\n            return self.converter(string)\n"
        "        return self.converter(string[::-1])",
    ),
}


@pytest.mark.parametrize("name", sorted(REPAIRS))
def test_repairs_that_keep_the_bug_differ_whatever_they_do_in_process(parse_diff, name):
    """A child that exits, raises, returns an always-equal object, or behaves differently where pytest is loaded:
    only what it returns is compared, in the runner. (The last one behaves cleanly in the replay and keeps the bug
    under pytest: the replay says "same", and the suite run, the repair grader's second signal, refuses it.)"""
    profile, root, diff, _ = parse_diff
    targets = targets_of(profile, root, _variant(root, KNOWN))
    repaired = _variant(root, KNOWN, REPAIRS[name])
    result = diff.compare([(repaired, targets)])[0]
    if name == "detects the grader, keeps the bug":
        assert result.status == "same"  # clean behaviour where the replay runs: see the repair grader's suite veto
    else:
        assert result.status == "differs", (name, result)


def test_a_module_level_change_shows_in_the_data_globals(parse_diff):
    profile, root, diff, _ = parse_diff
    text = (root / "parse.py").read_text()
    changed = {"parse.py": text.replace('"Jan": 1,', '"Jan": 2,', 1).encode()}
    assert changed["parse.py"] != text.encode()
    targets = targets_of(profile, root, changed)
    assert targets == (f"parse:{STATE}",)
    (result,) = diff.compare([(changed, targets)])
    assert result.status == "differs" and "MONTHS_MAP" in result.differs[0]


def test_what_nothing_replays_is_untrusted(parse_diff):
    profile, root, diff, _ = parse_diff
    head = "def __repr__(self):\n        return"
    changed = _variant(root, (head, head.replace("return", "x = 1\n        return")))
    targets = [t for t in targets_of(profile, root, changed) if not t.endswith(STATE)]
    results = diff.compare([(changed, targets), ({}, [])])
    assert [r.status for r in results] == ["untrusted", "untrusted"]
    assert "0 replayable" in results[0].detail or "never called" in results[0].detail
    assert "changes no function" in results[1].detail


def test_a_source_layouts_library_is_imported_where_it_is_replayed(swe_repo, sandbox, tmp_path):
    """isodate lives under ``src/``: the replay's workspace (inside the runner's own folder) puts ``src`` on the
    graded child's path, as a user runs a source layout, and the grader's folder leaving ``sys.path`` keeps it, so
    the clean library's recorded calls replay the same and are kept (they were all lost to a ModuleNotFoundError)."""
    profile, root, _ = swe_repo("isodate")
    target = "isodate.isodates:parse_date"
    recording = Differential(profile, root, sandbox, cache=tmp_path).recordings([target])[target]
    assert recording.recorded > 0 and len(recording.checks) == recording.recorded
