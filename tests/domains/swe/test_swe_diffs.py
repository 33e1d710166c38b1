"""Applying diffs to a copy of a clean checkout with git, and writing diffs git accepts."""

from __future__ import annotations

import pytest

from propel.domains.swe.checkout import git
from propel.domains.swe.diffs import apply_diff, diff_paths, unified_diff


@pytest.fixture()
def repo(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mod.py").write_text("def f(x):\n    return x + 1\n")
    (tmp_path / "notail.py").write_text("A = 1\nB = 2")  # no final newline
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "clean")
    return tmp_path


def test_applies_to_a_copy_and_leaves_the_checkout_clean(repo):
    diff = unified_diff("pkg/mod.py", "def f(x):\n    return x + 1\n", "def f(x):\n    return x - 1\n")
    got = apply_diff(repo, diff)
    assert got.ok and got.paths == ("pkg/mod.py",)
    assert got.files == {"pkg/mod.py": b"def f(x):\n    return x - 1\n"}
    assert (repo / "pkg" / "mod.py").read_text() == "def f(x):\n    return x + 1\n"
    assert git(repo, "status", "--porcelain").stdout == b""


def test_a_diff_against_a_file_without_final_newline_round_trips(repo):
    diff = unified_diff("notail.py", "A = 1\nB = 2", "A = 1\nB = 3")
    assert "\\ No newline at end of file" in diff
    assert apply_diff(repo, diff).files == {"notail.py": b"A = 1\nB = 3"}


def test_non_applying_and_unreadable_diffs_say_why(repo):
    stale = unified_diff("pkg/mod.py", "def f(x):\n    return x * 2\n", "def f(x):\n    return x * 3\n")
    got = apply_diff(repo, stale)
    assert not got.ok and "pkg/mod.py" in got.error
    assert isinstance(diff_paths(repo, "this is not a patch"), str)
    escape = unified_diff("../outside.py", "", "x = 1\n")
    assert not apply_diff(repo, escape).ok


def test_layers_compose_and_deletions_and_renames_are_reported(repo):
    bug = apply_diff(repo, unified_diff("pkg/mod.py", "def f(x):\n    return x + 1\n", "def f(x):\n    return x\n"))
    fix = unified_diff("pkg/mod.py", "def f(x):\n    return x\n", "def f(x):\n    return x + 1\n")
    assert not apply_diff(repo, fix).ok  # the repair applies to the buggy tree, not the clean one
    assert apply_diff(repo, fix, base=bug.files).files == {"pkg/mod.py": b"def f(x):\n    return x + 1\n"}
    rename = "diff --git a/notail.py b/other.py\nsimilarity index 100%\nrename from notail.py\nrename to other.py\n"
    got = apply_diff(repo, rename)
    assert got.ok and set(got.paths) == {"notail.py", "other.py"}
    assert got.files == {"notail.py": None, "other.py": b"A = 1\nB = 2"}


def test_a_diff_that_leaves_a_symlink_is_refused(repo):
    link = (
        "diff --git a/leak.py b/leak.py\nnew file mode 120000\nindex 0000000..1111111\n--- /dev/null\n"
        "+++ b/leak.py\n@@ -0,0 +1 @@\n+/etc/passwd\n\\ No newline at end of file\n"
    )
    got = apply_diff(repo, link)
    assert not got.ok and "symbolic link" in got.error


def test_a_new_file_diff_creates_the_file(repo):
    diff = unified_diff("pkg/extra.py", "", "X = 1\n", new_file=True)
    assert "--- /dev/null" in diff and "new file mode" in diff
    assert apply_diff(repo, diff).files == {"pkg/extra.py": b"X = 1\n"}
    assert unified_diff("pkg/mod.py", "same\n", "same\n") == ""
