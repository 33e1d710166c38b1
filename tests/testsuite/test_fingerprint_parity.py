"""Fingerprint parity (issue 73): graded code cannot tell that it is graded.

The probe (``propel.testing.fingerprint_probe``) records everything a program can observe about its process. It runs
under each grader and as a user runs it (``python3 -c 'import mod; ...'`` in the same sandbox, and the library's
suite under a user's own pytest), and every observable that differs must be listed, with its reason, in
``docs/trusted_grading.md``: a new difference (a grader flag, a variable, a module of the grader's, an object rebuilt
without its constructor) fails here. Both sandbox backends."""

from __future__ import annotations

from propel.testing import fingerprint as fp


def _unlisted(diff: dict, listed: dict) -> dict:
    return {key: (str(user)[:200], str(graded)[:200]) for key, (user, graded) in diff.items() if key not in listed}


def test_the_table_parses(allowed):
    assert {"value", "agent", "replay", "suite"} <= set(allowed)
    assert all(reason for table in allowed.values() for reason in table.values())


def test_value_grading_looks_like_a_users_run(box, allowed):
    """A HumanEval answer graded by value, and an agent's module graded as ``envs.verdict`` grades it."""
    files = {"solution.py": fp.PROBE}
    for grader, timeout_s, batch_size in (("value", 10.0, 8), ("agent", 30.0, 1)):
        first, second = (fp.user_observation(box, files, fp.VALUE_CALL, fp.value_limits(timeout_s)) for _ in "ab")
        graded = fp.value_observation(box, timeout_s=timeout_s, batch_size=batch_size)
        diff = fp.differences(first, graded, fp.noise(first, second))
        assert not _unlisted(diff, allowed[grader]), (grader, _unlisted(diff, allowed[grader]))
        for key in ("flags.isolated", "flags.no_site", "argv", "modules", "main", "frames", "fds", "path"):
            assert key not in diff, (grader, key, diff.get(key))  # the named tells, gone


def test_the_swe_replay_looks_like_a_users_run(box, allowed, tmp_path):
    """The library's call replayed by the SWE grader: the object made by its own constructor, the user's function
    looking like a user's, the interpreter, environment and modules of a plain run."""
    limits = fp.replay_limits(box, tmp_path / "repo", tmp_path / "cache")
    first, second = (fp.user_observation(box, {"probe_lib.py": fp.PROBE}, fp.LIBRARY_CALL, limits) for _ in "ab")
    graded = fp.replay_observation(box, tmp_path / "repo", tmp_path / "cache")
    diff = fp.differences(first, graded, fp.noise(first, second))
    assert not _unlisted(diff, allowed["replay"]), _unlisted(diff, allowed["replay"])
    assert graded["making"] == ["new", "init"] and graded["instance"]["inited"] is True
    assert graded["hash_randomization"] == 1 and not graded["hash_seed_zero"]
    for key in ("modules", "environ.HOME", "environ.TMPDIR", "flags.no_site", "main", "frames", "audit_hook_seen"):
        assert key not in diff, (key, diff.get(key))


def test_the_swe_suite_differs_only_where_listed(box, allowed, tmp_path):
    """The repository suite is pytest in the hardened runner: it differs from a user's pytest run in ways the table
    lists (it can refuse a repair, never pay one: the replay decides)."""
    limits = fp.suite_limits(box, tmp_path / "user")
    user = fp.suite_user_observation(box, tmp_path / "user", limits)
    differing = fp.suite_differences(box, tmp_path / "suite", user)
    assert differing - set(allowed["suite"]) == set(), sorted(differing - set(allowed["suite"]))
