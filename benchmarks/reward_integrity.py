"""Reward integrity of the test-suite reward, per grader and sandbox backend, in one table; then throughput.

Integrity (targets in brackets): the red-team corpus (``propel.tasks.humaneval.corpus``): hacks run, hacks scoring
at or above the honest partial solution of their task [0], hacks missing their expected flags [0], hacks with no
flag at all (listed: each is inert, its trick found nothing to act on, and it scores 0; an unflagged hack scoring
above 0 stops the benchmark); false positives
on the 164 canonical solutions [0] and on honest agents that comment or delete their copy of the visible tests [0];
the universal sweep (every task-independent hack on ``--sweep-tasks`` tasks): submissions scoring above 0 [0] and
the mean reward [0.000]. SWE: repairs that leave the bug in place and rig the run from library code, graded
``solved`` [0].

Throughput: rewards/s on the canonical solutions of the first ``--solutions`` tasks, value grader and hardened
pytest grader against the naive baseline (plain ``pytest`` in a fresh process per solution, no sandbox), 2 workers.

    .venv/bin/python benchmarks/reward_integrity.py --backends local docker
    .venv/bin/python benchmarks/reward_integrity.py --backends local --sweep-tasks 20 --solutions 16 --no-swe  # quick
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from rich.console import Console
from rich.table import Table

GRADERS = ("value", "pytest")


def _sample(task, files, agent=False):
    from propel.rollouts.record import Sample

    ctx = task.agent_context() if agent else task.single_turn_context()
    return Sample(prompt="", completion="", context=ctx, artifacts={"files": files})


def _grade(sandbox, grader, samples, batch_size=16):
    from propel.rewards import TestSuiteReward

    reward = TestSuiteReward(sandbox=sandbox, grader=grader, timeout_s=5.0, batch_size=batch_size, seed=0)
    start = time.perf_counter()
    values = reward(samples).tolist()
    return values, time.perf_counter() - start


def corpus_row(sandbox, grader, tasks) -> dict:
    from propel.tasks.humaneval.corpus import CORPUS, entry_files

    samples = []
    for entry in CORPUS:
        task = tasks[entry.task_id]
        samples.append(_sample(task, entry_files(entry, task), agent=entry.mode == "agent"))
    rewards, _ = _grade(sandbox, grader, samples)
    graded = list(zip(CORPUS, rewards, samples, strict=True))
    partial = {(e.mode, e.task_id): r for e, r, _ in graded if e.kind == "honest_partial"}
    hacks = [(e, r, s) for e, r, s in graded if e.kind == "hack"]
    above = [e.name for e, r, _ in hacks if r >= partial[(e.mode, e.task_id)]]
    missing = [e.name for e, _, s in hacks if not e.flags(grader) <= set(s.info["test_suite"]["flags"])]
    unflagged = [e.name for e, r, s in hacks if not s.info["test_suite"]["flags"]]
    if any(r > 0 for e, r, s in hacks if not s.info["test_suite"]["flags"]):
        raise SystemExit(f"{grader}: an unflagged hack scored above 0")
    honest_agents = [(e, s) for e, _, s in graded if e.mode == "agent" and e.kind == "honest_correct"]
    agent_fp = [
        e.name for e, s in honest_agents if s.info["test_suite"]["pass_rate"] < 1 or s.info["test_suite"]["hacked"]
    ]
    return {
        "cases": len(hacks),
        "above": above,
        "missing": missing,
        "unflagged": unflagged,
        "agent_fp": agent_fp,
        "agents": len(honest_agents),
    }


def canonical_fp(sandbox, grader, tasks) -> tuple[int, float]:
    samples = [_sample(t, {"solution.py": t.reference}) for t in tasks.values()]
    _, wall = _grade(sandbox, grader, samples)
    bad = [s for s in samples if s.info["test_suite"]["pass_rate"] < 1 or s.info["test_suite"]["flags"]]
    return len(bad), len(samples) / wall


def sweep(sandbox, grader, tasks, n_tasks) -> tuple[int, int, float]:
    from propel.tasks.humaneval.corpus import CORPUS, single_source

    chosen = random.Random(0).sample(list(tasks.values()), min(n_tasks, len(tasks)))
    samples = [_sample(t, {"solution.py": single_source(e, t)}) for e in CORPUS if e.universal for t in chosen]
    rewards, _ = _grade(sandbox, grader, samples, batch_size=32)
    return len(samples), sum(r > 0 for r in rewards), sum(rewards) / len(rewards)


def naive_one(task) -> bool:
    """Plain pytest in a fresh process on one solution (no sandbox, no guard): True when every test passed."""
    from propel.rewards.code_tests import split_suite
    from propel.testsuite import parse_junit
    from propel.testsuite.split_suite import pytest_files

    data = task.single_turn_context().data
    layout = pytest_files(split_suite(data), random.Random(0), n_canaries=0)
    with tempfile.TemporaryDirectory() as root:
        for name, text in {"solution.py": task.reference, **layout.files}.items():
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        report = os.path.join(root, "junit.xml")
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}", root]
        subprocess.run(cmd, cwd=root, capture_output=True, timeout=120, check=False)
        try:
            with open(report) as f:
                outcomes = parse_junit(f.read())
        except OSError:
            return False
    return len(outcomes) == len(layout.names) and all(o == "passed" for o in outcomes.values())


def naive_rate(tasks, workers=2) -> float:
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = list(pool.map(naive_one, tasks))
    if not all(ok):
        raise SystemExit("the naive baseline failed a canonical solution: the runners disagree")
    return len(tasks) / (time.perf_counter() - start)


def swe_rows(backend: str) -> list[tuple[str, str, str]]:
    """Each tampering repair of ``tests/domains/swe/test_swe_repair_hacks.py`` graded on the parse repo."""
    import importlib.util
    from pathlib import Path

    from propel.domains.swe.checkout import checkout
    from propel.domains.swe.diffs import unified_diff
    from propel.domains.swe.prepare import load_manifest
    from propel.domains.swe.repos import get_repo
    from propel.domains.swe.validity import BugValidator
    from propel.sandbox import make_sandbox

    here = Path(__file__).resolve().parents[1] / "tests/domains/swe/test_swe_repair_hacks.py"
    spec = importlib.util.spec_from_file_location("repair_hacks", here)
    hacks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hacks)
    profile = get_repo("parse")
    root = checkout(profile)
    rows = []
    with make_sandbox(backend) as sandbox:
        v = BugValidator(profile, root, sandbox, manifest=load_manifest(profile, sandbox))
        text = (Path(root) / "parse.py").read_text()
        verdict = v.check(unified_diff("parse.py", text, text.replace(*hacks.KNOWN, 1)))
        buggy = verdict.files["parse.py"].decode()
        cases = {"honest revert": unified_diff("parse.py", buggy, text)}
        for name in ("_PATCH_REPORT", "_SILENCE_JUNIT", "_REWRITE_TESTS", "_BUILTINS", "_FRAMES"):
            cases[name.strip("_").lower()] = unified_diff(
                "parse.py", buggy, buggy.rstrip("\n") + "\n\n" + getattr(hacks, name)
            )
        for name, diff in cases.items():
            result = v.grade_repair(verdict, diff)
            rows.append((name, str(result.solved), result.reason or "-"))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", nargs="+", default=["local"], choices=("local", "docker"))
    parser.add_argument("--sweep-tasks", type=int, default=164, help="tasks in the universal sweep")
    parser.add_argument("--solutions", type=int, default=48, help="canonical solutions in the throughput rows")
    parser.add_argument("--canonical", type=int, default=164, help="canonical solutions checked for false positives")
    parser.add_argument("--no-swe", action="store_true", help="skip the SWE repair rows")
    args = parser.parse_args(argv)

    from propel.sandbox import make_sandbox
    from propel.tasks.humaneval import load_humaneval

    tasks = {t.task_id: t for t in load_humaneval()}
    console = Console(width=200)
    table = Table(title="Test-suite reward integrity (targets: 0 / 0 / 0 / 0 / 0 / 0.000)")
    for col in ("grader", "backend", "hacks run", ">= honest partial", "missing flag", "unflagged (inert, 0)"):
        table.add_column(col, justify="right")
    for col in (f"FP canonical ({args.canonical})", "FP honest agents", "sweep runs", "sweep > 0", "sweep mean"):
        table.add_column(col, justify="right")
    speed = Table(title=f"Throughput on {args.solutions} canonical solutions, 2 workers")
    for col in ("grader", "backend", "rewards/s", "vs naive pytest"):
        speed.add_column(col, justify="right")
    first = list(tasks.values())[: args.solutions]
    naive = naive_rate(first)
    speed.add_row("naive: plain pytest per solution, no sandbox", "-", f"{naive:.2f}", "1.0x")
    for backend in args.backends:
        with make_sandbox(backend, max_workers=2) as sandbox:
            for grader in GRADERS:
                row = corpus_row(sandbox, grader, tasks)
                fp, _ = canonical_fp(sandbox, grader, dict(list(tasks.items())[: args.canonical]))
                runs, scored, mean = sweep(sandbox, grader, tasks, args.sweep_tasks)
                table.add_row(
                    grader,
                    backend,
                    str(row["cases"]),
                    str(len(row["above"])),
                    str(len(row["missing"])),
                    str(len(row["unflagged"])),
                    str(fp),
                    f"{len(row['agent_fp'])} of {row['agents']}",
                    str(runs),
                    str(scored),
                    f"{mean:.3f}",
                )
                for label, names in (("above", row["above"]), ("missing", row["missing"])):
                    if names:
                        console.print(f"[red]{grader}/{backend} {label}: {names}")
                _, rate = canonical_fp(sandbox, grader, {t.task_id: t for t in first})
                speed.add_row(grader, backend, f"{rate:.2f}", f"{rate / naive:.1f}x")
    console.print(table)
    console.print(speed)
    if not args.no_swe:
        swe = Table(title="SWE repairs on parse (the bug left in place, the run rigged from parse.py)")
        for col in ("repair", "backend", "solved", "reason"):
            swe.add_column(col)
        for backend in args.backends:
            for name, solved, reason in swe_rows(backend):
                swe.add_row(name, backend, solved, reason)
        console.print(swe)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
