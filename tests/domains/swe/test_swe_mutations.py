"""The procedural bug generator: each transform, determinism per seed, and diffs that git applies."""

from __future__ import annotations

import random

import libcst as cst
import pytest

from propel.domains.swe import mutations
from propel.domains.swe.checkout import git
from propel.domains.swe.diffs import apply_diff
from propel.domains.swe.mutations import TRANSFORMS, generate_bugs
from propel.domains.swe.repos import RepoProfile

SOURCE = '''"""A module."""
LIMIT = 10


def clamp(xs, lo, hi):
    """Clamp."""
    out = []
    for x in xs:
        if x < lo:
            x = lo
        out.append(min(x, hi))
    return out[0:2] + [lo & hi] if True else out
'''


def _mutants(transform):
    module = mutations._Module(SOURCE)
    sites = [k for k, (t, _) in enumerate(module.sites) if t == transform]
    return [module.mutate(k, random.Random(0)) for k in sites]


@pytest.mark.parametrize(
    "transform, expected",
    [
        ("flip_comparison", "if x >= lo:"),
        ("flip_operator", "return out[0:2] - [lo & hi]"),
        ("flip_operator", "[lo | hi]"),
        ("off_by_one", "out[1:2]"),
        ("swap_arguments", "min(hi, x)"),
        ("remove_statement", None),
        ("change_constant", "if False else out"),
    ],
)
def test_each_transform_changes_function_code_only(transform, expected):
    got = _mutants(transform)
    assert got, f"no {transform} site found"
    codes = [code for code, _ in filter(None, got)]
    if transform == "remove_statement":
        assert any("out.append(" not in code for code in codes) and any("out = []" not in code for code in codes)
    else:
        assert any(expected in code for code in codes), codes
    for code in codes:
        assert "LIMIT = 10" in code  # module level is left alone: the module still imports
        compile(code, "m", "exec")


def test_docstrings_and_lone_statements_are_not_removed():
    codes = [code for code, _ in filter(None, _mutants("remove_statement"))]
    assert codes and all('"""Clamp."""' in code for code in codes)
    assert all("x = lo" in code for code in codes)  # the only statement of its block


def test_operator_tables_are_symmetric_and_refuse_repeated_keys():
    for table in (mutations.FLIPPED_COMPARISONS, mutations.FLIPPED_OPERATORS):
        assert all(table[table[k]] is k for k in table)
    assert mutations.FLIPPED_OPERATORS[cst.BitAnd] is cst.BitOr and mutations.FLIPPED_OPERATORS[cst.BitOr] is cst.BitAnd
    with pytest.raises(ValueError, match="BitAnd"):  # SWE-smith's FLIPPED_OPERATORS listed BitAnd twice
        mutations._symmetric([(cst.BitAnd, cst.BitOr), (cst.BitAnd, cst.BitXor)])


@pytest.fixture()
def tiny_repo(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "core.py").write_text(SOURCE)
    (tmp_path / "pkg" / "more.py").write_text(SOURCE.replace("clamp", "clip"))
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_core.py").write_text("def test_x():\n    assert 1 < 2\n")
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", "-A")
    git(tmp_path, "commit", "-q", "-m", "clean")
    profile = RepoProfile("tiny", "tiny", "0", "0" * 64, test_paths=("tests",), source_globs=("pkg/*.py", "tests/*"))
    return profile, tmp_path


def test_generation_is_deterministic_per_seed_and_diffs_apply(tiny_repo):
    profile, root = tiny_repo
    bugs = generate_bugs(profile, root, 12, seed=3)
    assert len(bugs) == 12 and len({b.diff for b in bugs}) == 12
    assert [b.diff for b in bugs] == [b.diff for b in generate_bugs(profile, root, 12, seed=3)]
    assert [b.diff for b in bugs] != [b.diff for b in generate_bugs(profile, root, 12, seed=4)]
    assert {b.transform for b in bugs} == set(TRANSFORMS)
    for bug in bugs:
        assert bug.path in ("pkg/core.py", "pkg/more.py")  # never the tests
        applied = apply_diff(root, bug.diff)
        assert applied.ok and list(applied.files) == [bug.path]
    only = generate_bugs(profile, root, 5, seed=0, transforms=("swap_arguments",))
    assert only and {b.transform for b in only} == {"swap_arguments"}
    with pytest.raises(ValueError, match="unknown transforms"):
        generate_bugs(profile, root, 1, transforms=("nope",))
