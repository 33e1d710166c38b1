"""Can graded code tell that it is graded? The watch-aware family (``propel.testing.watch_aware``: one program per
observable of the fingerprint probe, correct only where that observable differs from a user's run) graded by value,
as an agent's module (``envs.verdict``) and as SWE repairs (replay, then suite), and the honest repairs of the parse
bug that change only private state (a per-instance memo, ``__slots__``, a lazily cached attribute), per backend.

Prints, per backend and grader, how many members were paid and which observables they branch on (each must be a
remaining difference ``docs/trusted_grading.md`` lists), and which honest repairs were solved. The parse repository
must be prepared (``python -m propel.domains.swe.prepare``); Docker needs a running engine and the
``propel-sandbox:py3`` image (``scripts/docker_engine.sh``).

    .venv/bin/python benchmarks/fingerprint_parity.py --backends local docker
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table


def _user(box, files, call, limits):
    from propel.testing import fingerprint as fp

    first, second = (fp.user_observation(box, files, call, limits) for _ in "ab")
    noise = fp.noise(first, second)
    return {k: v for k, v in fp.flattened(first).items() if k not in noise}


def value_and_agent(box) -> dict[str, tuple[int, list[str]]]:
    """``{grader: (members, the observables of the paid ones)}`` for value grading and agent verdicts."""
    from propel.envs.verdict import verdict
    from propel.testing import fingerprint as fp
    from propel.testing import watch_aware as wa
    from propel.testsuite.values import ValueRunner, ValueSubmission, ValueTests

    user = _user(box, {"solution.py": fp.PROBE}, fp.VALUE_CALL, fp.value_limits())
    keys = sorted(user)
    members = [wa.value_member(key, user[key]) for key in keys]
    tests = ValueTests(list(wa.VALUE_TESTS), "probe")
    runs = ValueRunner(box, batch_size=8).run([ValueSubmission({"solution.py": m}, tests) for m in members])
    paid = [k for k, run in zip(keys, runs, strict=True) if set(run.tests.values()) == {"passed"}]
    data = {"value_tests": {"module": "solution", "entry_point": "probe", "tests": [list(t) for t in wa.VALUE_TESTS]}}
    agent = [k for k, m in zip(keys, members, strict=True) if verdict(data, {"solution.py": m}, [], box)["passed"]]
    return {"value": (len(keys), paid), "agent": (len(keys), agent)}


def swe(box) -> tuple[int, list[str]]:
    """``(members, the observables of the solved ones)`` for the SWE repairs of the watched library's bug."""
    from propel.domains.swe.differential import Differential
    from propel.domains.swe.diffs import unified_diff
    from propel.domains.swe.prepare import load_manifest
    from propel.domains.swe.validity import BugValidator
    from propel.testing import fingerprint as fp
    from propel.testing import watch_aware as wa

    cache = tempfile.mkdtemp()
    profile, root = wa.checked_out(cache)
    validator = BugValidator(profile, root, box, manifest=load_manifest(profile, box, cache=cache))
    validator.differential = Differential(profile, root, box, cache=cache, batch_size=16)
    name = f"{fp.LIBRARY}.py"
    bug = validator.check(unified_diff(name, wa.library(), wa.BUGGY))
    if not bug.trusted:
        raise SystemExit(f"the watched library's bug cannot be graded out of process: {bug.reason} {bug.detail}")
    limits = fp.replay_limits(box, Path(cache) / "probe", Path(cache) / "probe-cache")
    user = _user(box, {name: fp.PROBE}, fp.LIBRARY_CALL, limits)
    keys = sorted(user)
    members = [wa.library_member(key, user[key]) for key in keys]
    compared = validator.differential.compare([({name: m}, bug.targets) for m in members])
    same = [(k, m) for k, m, c in zip(keys, members, compared, strict=True) if c.status == "same"]
    return len(keys), [k for k, m in same if validator.grade_repair(bug, unified_diff(name, wa.BUGGY, m)).solved]


def honest(box) -> dict[str, bool]:
    """``{repair: solved}`` for the honest repairs of the parse bug that change only private state."""
    from propel.domains.swe.checkout import checkout
    from propel.domains.swe.diffs import unified_diff
    from propel.domains.swe.prepare import load_manifest
    from propel.domains.swe.repos import get_repo
    from propel.domains.swe.validity import BugValidator
    from propel.testing.swe_repairs import BUG, HONEST

    profile = get_repo("parse")
    root = checkout(profile)
    validator = BugValidator(profile, root, box, manifest=load_manifest(profile, box))
    text = (Path(root) / "parse.py").read_text()
    bug = validator.check(unified_diff("parse.py", text, text.replace(*BUG, 1)))
    buggy = bug.files["parse.py"].decode()
    private = ("revert_with_a_per_instance_memo", "revert_with_slots", "revert_with_a_lazily_cached_attribute")
    out = {}
    for repair in [r for r in HONEST if r.name in private]:
        out[repair.name] = validator.grade_repair(bug, unified_diff("parse.py", buggy, repair.apply(buggy))).solved
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", nargs="+", default=["local"], choices=["local", "docker"])
    args = parser.parse_args()
    from propel.sandbox import LocalSandbox

    table = Table(title="Watch-aware programs paid (each branches on one observable of the fingerprint probe)")
    for column in ("backend", "grader", "members", "paid", "observables of the paid members", "seconds"):
        table.add_column(column)
    repairs = Table(title="Honest repairs that change only private state")
    for column in ("backend", "repair", "solved"):
        repairs.add_column(column)
    for backend in args.backends:
        if backend == "docker":
            from propel.sandbox.docker import DockerSandbox

            box = DockerSandbox(max_workers=2)
        else:
            box = LocalSandbox(max_workers=2)
        with box:
            start = time.monotonic()
            graded = value_and_agent(box)
            graded["swe (replay, then suite)"] = swe(box)
            seconds = time.monotonic() - start
            for grader, (members, paid) in graded.items():
                table.add_row(backend, grader, str(members), str(len(paid)), ", ".join(paid), f"{seconds:.0f}")
            for repair, solved in honest(box).items():
                repairs.add_row(backend, repair, str(solved))
    console = Console(width=200)
    console.print(table)
    console.print(repairs)


if __name__ == "__main__":
    main()
