"""Watch-aware programs are not paid (issue 73): a generated family, one member per observable of the fingerprint
probe, each correct only where that observable differs from a user's run and buggy for the user, graded by value (a
HumanEval-style answer), as an agent's module (``envs.verdict``) and as an SWE repair (replay, then suite), on both
backends. A member is paid only where its observable is one ``docs/trusted_grading.md`` lists as a remaining
difference; the named tells of the review (``sys.modules``, ``sys.flags``, ``HOME``/``TMPDIR``, an object built
without ``__init__``, the replay's converter) are never paid. Controls: the honest program is paid every time."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from propel.domains.swe.differential import Differential
from propel.domains.swe.diffs import unified_diff
from propel.domains.swe.prepare import load_manifest
from propel.domains.swe.validity import BugValidator
from propel.envs.verdict import verdict
from propel.testing import fingerprint as fp
from propel.testing import watch_aware as wa
from propel.testsuite.values import ValueRunner, ValueSubmission, ValueTests

NAMED = {"modules", "flags.isolated", "flags.no_site", "environ.HOME", "environ.TMPDIR", "home_is_tmpdir", "making"}
NAMED |= {"instance", "audit_hook_seen", "argv", "main", "frames", "fds", "hash_seed_zero", "gc_types", "path"}
"""Observables the review named or that a grader showed before parity: never paid."""


def _user(box, files, call, limits):
    """The user's observation, flattened, without the observables two user runs disagree on."""
    first, second = (fp.user_observation(box, files, call, limits) for _ in "ab")
    noise = fp.noise(first, second)
    return {k: v for k, v in fp.flattened(first).items() if k not in noise}


def test_watch_aware_answers_are_not_paid_by_value_or_agent_verdicts(box, allowed):
    user = _user(box, {"solution.py": fp.PROBE}, fp.VALUE_CALL, fp.value_limits())
    keys = sorted(user)
    tests = ValueTests(list(wa.VALUE_TESTS), "probe")
    members = [wa.value_member(key, user[key]) for key in keys]
    runs = ValueRunner(box, batch_size=8).run([ValueSubmission({"solution.py": m}, tests) for m in members])
    honest, buggy = ValueRunner(box).run(
        [ValueSubmission({"solution.py": text}, tests) for text in (wa.VALUE_HONEST, wa.value_member("x", None))]
    )
    assert set(honest.tests.values()) == {"passed"} and set(buggy.tests.values()) == {"failed"}  # controls
    paid = {key for key, run in zip(keys, runs, strict=True) if set(run.tests.values()) == {"passed"}}
    assert paid <= set(allowed["value"]) and not paid & NAMED, sorted(paid)

    data = {"value_tests": {"module": "solution", "entry_point": "probe", "tests": [list(t) for t in wa.VALUE_TESTS]}}

    def agent(text):
        return verdict(data, {"solution.py": text}, [], box)["passed"]

    # an agent's module is graded alone in its job, by the same child: the members on the named observables and on
    # those value grading still shows
    sample = [k for k in keys if k in NAMED or k in allowed["agent"] or k.startswith(("flags.", "environ."))]
    with ThreadPoolExecutor(2) as pool:
        verdicts = list(pool.map(agent, [wa.VALUE_HONEST, *(members[keys.index(k)] for k in sample)]))
    assert verdicts[0]  # the control
    paid_agent = {key for key, ok in zip(sample, verdicts[1:], strict=True) if ok}
    assert paid_agent <= set(allowed["agent"]) and not paid_agent & NAMED, sorted(paid_agent)


@pytest.fixture(scope="module")
def watched_repo(box, tmp_path_factory):
    """The library whose ``Probe.look`` upper-cases, its bug (lower-cases), and a validator with its own cache."""
    cache = tmp_path_factory.mktemp("cache")
    profile, root = wa.checked_out(cache)
    validator = BugValidator(profile, root, box, manifest=load_manifest(profile, box, cache=cache))
    validator.differential = Differential(profile, root, box, cache=cache, batch_size=16)
    bug = validator.check(unified_diff(f"{fp.LIBRARY}.py", wa.library(), wa.BUGGY))
    assert bug.valid and bug.trusted, bug
    return validator, bug


def test_watch_aware_repairs_are_not_solved(box, allowed, watched_repo, tmp_path):
    validator, bug = watched_repo
    limits = fp.replay_limits(box, tmp_path / "repo", tmp_path / "cache")
    user = _user(box, {f"{fp.LIBRARY}.py": fp.PROBE}, fp.LIBRARY_CALL, limits)
    keys = sorted(user)
    members = {key: wa.library_member(key, user[key]) for key in keys}
    name = f"{fp.LIBRARY}.py"
    compared = validator.differential.compare([({name: text}, bug.targets) for text in members.values()])
    replayed_clean = [key for key, c in zip(keys, compared, strict=True) if c.status == "same"]
    assert set(replayed_clean) <= set(allowed["replay"]) and not set(replayed_clean) & NAMED, replayed_clean
    solved = {k for k in replayed_clean if validator.grade_repair(bug, unified_diff(name, wa.BUGGY, members[k])).solved}
    assert solved <= set(allowed["replay"]), sorted(solved)
    honest = validator.grade_repair(bug, unified_diff(name, wa.BUGGY, wa.library()))
    assert honest.solved, honest  # the control
