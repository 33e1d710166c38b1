"""The repo registry: enough distinct repos for repo-disjoint splits, and the test-path rules bugs are held to."""

from __future__ import annotations

import pytest

from propel.domains.swe.repos import REPOS, get_repo


def test_registry_ships_six_or_more_repos_with_pinned_sdists():
    assert len(REPOS) >= 6
    for name, p in REPOS.items():
        assert p.name == name and p.key == f"{name}-{p.version}"
        assert len(p.sha256) == 64 and p.archive.endswith(f"-{p.version}.tar.gz")
        assert p.test_paths and p.source_globs and p.timeout_s > 0
    assert "iniconfig" not in REPOS and "pluggy" not in REPOS and "packaging" not in REPOS  # pytest's own deps


@pytest.mark.parametrize(
    "path, is_test",
    [
        ("tests/test_parse.py", True),
        ("tests/data/input.txt", True),
        ("test_inflection.py", True),
        ("toolz/tests/test_itertoolz.py", True),
        ("conftest.py", True),
        ("src/pkg/conftest.py", True),
        ("pyproject.toml", True),
        ("setup.cfg", True),
        ("tox.ini", True),
        ("./tests/test_x.py", True),
        ("parse.py", False),
        ("src/isodate/isodates.py", False),
        ("toolz/itertoolz.py", False),
        ("contest.py", False),
    ],
)
def test_test_path_rules(path, is_test):
    assert get_repo("parse").is_test_path(path) is is_test


def test_source_paths_exclude_tests():
    toolz = get_repo("toolz")
    assert toolz.is_source_path("toolz/itertoolz.py")
    assert not toolz.is_source_path("toolz/tests/test_itertoolz.py")  # matched by toolz/*.py, but a test
    assert not toolz.is_source_path("setup.py")


def test_unknown_repo_names_the_known_ones():
    with pytest.raises(KeyError, match="parse"):
        get_repo("nope")
