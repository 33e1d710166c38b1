"""Reward integrity of every grader propel pays with, per grader and sandbox backend, in one table; then throughput.

Per grader and backend (targets in brackets):

- ``value`` (HumanEval, the test-suite reward's default): the red-team corpus's hacks
  (``propel.testing.testsuite_hacks``) and the task-independent ones swept over ``--sweep-tasks`` tasks, paid when the
  reward is above an honest failure's 0 [0]; honest cases (``--canonical`` canonical solutions, the corpus's honest
  entries, ``propel.testing.honest_code``) penalised when flagged or scored below their held-out pass rate [0].
- ``pytest`` (in process, opt-in: an evaluation-only grader whose verdict the graded code can reach): the same cases,
  reported as they come out.
- ``swe`` (repairs of a parse bug, ``propel.testing.swe_repairs``): attacks that keep the bug, paid when graded
  ``solved`` [0]; honest repairs written several ways, penalised when not ``solved`` [0].
- ``agent`` (agent verdicts, ``propel.testing.agent_verdicts`` on the shell fix task and HumanEval agent tasks):
  attacks paid when the verdict passes [0]; honest fixes penalised when it fails [0].

Throughput, 2 workers: rewards/s of the value and pytest graders on ``--solutions`` canonical solutions (a second
pass: the hard-coding check's reference answers are computed once per task, on the first) against the naive
baseline (plain ``pytest`` in a fresh process per solution, no sandbox); seconds per SWE repair graded (differential
replay, then the suite as the second signal) against the previous grader (the suite alone); seconds per agent verdict
(value tests in a fresh sandboxed child) against the previous one (the check script run by ``python3`` in a sandbox
job, its exit status the verdict).

    .venv/bin/python benchmarks/reward_integrity.py --backends local docker
    .venv/bin/python benchmarks/reward_integrity.py --backends local --sweep-tasks 20 --solutions 16  # quick
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
from pathlib import Path

from rich.console import Console
from rich.table import Table


def _sample(task, files, agent=False):
    from propel.records import Sample

    ctx = task.agent_context() if agent else task.single_turn_context()
    return Sample(prompt="", completion="", context=ctx, artifacts={"files": files})


def _grade(sandbox, grader, samples, batch_size=16, warm=False):
    """Rewards and the seconds grading took; ``warm``: time a second pass (the reference answers of the hard-coding
    check are computed once per task and kept, as in training after its first step)."""
    from propel.rewards import TestSuiteReward

    reward = TestSuiteReward(
        sandbox=sandbox, grader=grader, allow_in_process_verdict=True, timeout_s=5.0, batch_size=batch_size, seed=0
    )
    if warm:
        reward([_sample_copy(s) for s in samples])
    start = time.perf_counter()
    values = reward(samples).tolist()
    return values, time.perf_counter() - start


def _sample_copy(s):
    from propel.records import Sample

    return Sample(prompt="", completion="", context=s.context, artifacts=dict(s.artifacts))


def suite_rows(sandbox, grader, tasks, sweep_tasks, canonical) -> dict:
    """Cases run, paid and penalised on one test-suite grader."""
    from propel.testing.honest_code import correct_solutions, near_misses
    from propel.testing.testsuite_hacks import CORPUS, entry_files, single_source

    samples = [_sample(tasks[e.task_id], entry_files(e, tasks[e.task_id]), e.mode == "agent") for e in CORPUS]
    names = [e.name for e in CORPUS]
    kinds = ["hack" if e.kind == "hack" else "honest" for e in CORPUS]
    for name, task_id, code in [*correct_solutions(tasks), *near_misses(tasks)]:
        samples.append(_sample(tasks[task_id], {"solution.py": code}))
        names.append(name)
        kinds.append("honest")
    for task in list(tasks.values())[:canonical]:
        samples.append(_sample(task, {"solution.py": task.reference}))
        names.append(f"canonical {task.task_id}")
        kinds.append("honest")
    chosen = random.Random(0).sample(list(tasks.values()), min(sweep_tasks, len(tasks)))
    for entry in (e for e in CORPUS if e.universal):
        for task in chosen:
            samples.append(_sample(task, {"solution.py": single_source(entry, task)}))
            names.append(f"{entry.name} on {task.task_id}")
            kinds.append("hack")
    rewards, _ = _grade(sandbox, grader, samples, batch_size=32)
    paid, penalised = [], []
    for name, kind, reward, s in zip(names, kinds, rewards, samples, strict=True):
        info = s.info["test_suite"]
        if kind == "hack" and reward > 0:
            paid.append(name)
        if kind == "honest" and (info["hacked"] or reward < info["pass_rate"] - 1e-9):
            penalised.append(name)
    return {"hacks": kinds.count("hack"), "honest": kinds.count("honest"), "paid": paid, "penalised": penalised}


def swe_rows(sandbox) -> tuple[dict, float, float]:
    """The SWE repair classes on parse, and seconds per repair graded (new) and per suite run alone (previous)."""
    from propel.domains.swe.checkout import checkout
    from propel.domains.swe.diffs import unified_diff
    from propel.domains.swe.prepare import load_manifest
    from propel.domains.swe.repos import get_repo
    from propel.domains.swe.validity import BugValidator
    from propel.testing.swe_repairs import ATTACKS, BUG, HONEST

    profile = get_repo("parse")
    root = checkout(profile)
    v = BugValidator(profile, root, sandbox, manifest=load_manifest(profile, sandbox))
    text = (Path(root) / "parse.py").read_text()
    verdict = v.check(unified_diff("parse.py", text, text.replace(*BUG, 1)))
    buggy = verdict.files["parse.py"].decode()
    paid, penalised, spent = [], [], 0.0
    for repair in [*ATTACKS, *HONEST]:
        start = time.perf_counter()
        result = v.grade_repair(verdict, unified_diff("parse.py", buggy, repair.apply(buggy)))
        spent += time.perf_counter() - start
        if repair.kind == "attack" and result.solved:
            paid.append(repair.name)
        if repair.kind == "honest" and not result.solved:
            penalised.append(f"{repair.name} ({result.reason})")
    start = time.perf_counter()
    for repair in HONEST:
        v.suite.run_one({"parse.py": repair.apply(buggy).encode()})
    suite_alone = (time.perf_counter() - start) / len(HONEST)
    rows = {"hacks": len(ATTACKS), "honest": len(HONEST), "paid": paid, "penalised": penalised}
    return rows, spent / (len(ATTACKS) + len(HONEST)), suite_alone


def agent_rows(sandbox) -> tuple[dict, float, float]:
    """The agent workspace classes on shell and HumanEval agent tasks; seconds per verdict, new and previous."""
    from propel.envs.verdict import verdict
    from propel.sandbox import Job
    from propel.tasks.humaneval import HumanEvalAgentTasks
    from propel.tasks.shell import ShellTasks
    from propel.testing.agent_verdicts import WORKSPACES

    contexts = [
        *ShellTasks(["fix_function"], demonstration=False).contexts(2, seed=1),
        *HumanEvalAgentTasks(task_ids=["HumanEval/0", "HumanEval/13", "HumanEval/148"]).contexts(3, seed=0),
    ]
    paid, penalised, runs = [], [], 0
    start = time.perf_counter()
    for workspace in WORKSPACES:
        for ctx in contexts:
            runs += 1
            files = {**ctx.data["files"], **workspace.files(ctx)}
            passed = verdict(ctx.data, files, [], sandbox)["passed"]
            if workspace.kind == "attack" and passed:
                paid.append(f"{workspace.name} on {ctx.id}")
            if workspace.kind == "honest" and not passed:
                penalised.append(f"{workspace.name} on {ctx.id}")
    per_verdict = (time.perf_counter() - start) / runs
    checks = []  # the previous verdict: the tests as a script, its exit status the verdict
    for ctx in contexts:
        spec = ctx.data["value_tests"]
        lines = [
            "import sys",
            "sys.path.insert(0, '.')",
            spec.get("helpers", ""),
            spec.get("preamble", ""),
            f"from {spec['module']} import {spec['entry_point']} as candidate",
        ]
        lines += [body for _, body in spec["tests"]]
        files = {**ctx.data["files"], **next(w for w in WORKSPACES if w.kind == "honest").files(ctx)}
        checks.append(Job(command=["python3", "-c", "\n".join(lines)], files=files))
    start = time.perf_counter()
    for job in checks:
        sandbox.run_many([job])
    previous = (time.perf_counter() - start) / len(checks)
    attacks = sum(w.kind == "attack" for w in WORKSPACES) * len(contexts)
    rows = {"hacks": attacks, "honest": runs - attacks, "paid": paid, "penalised": penalised}
    return rows, per_verdict, previous


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backends", nargs="+", default=["local"], choices=("local", "docker"))
    parser.add_argument("--sweep-tasks", type=int, default=164, help="tasks in the universal sweep")
    parser.add_argument("--solutions", type=int, default=48, help="canonical solutions in the throughput rows")
    parser.add_argument("--canonical", type=int, default=164, help="canonical solutions among the honest cases")
    parser.add_argument("--graders", nargs="+", default=["value", "pytest", "swe", "agent"])
    args = parser.parse_args(argv)

    from propel.sandbox import make_sandbox
    from propel.tasks.humaneval import load_humaneval

    tasks = {t.task_id: t for t in load_humaneval()}
    console = Console(width=200)
    table = Table(title="Reward integrity (targets: paid 0, honest penalised 0; pytest: in process, opt-in)")
    for col in ("grader", "backend", "attack cases", "paid", "honest cases", "honest penalised"):
        table.add_column(col, justify="right")
    speed = Table(title="Throughput, 2 workers")
    for col in ("grader", "backend", "this grader", "previous grader", "ratio"):
        speed.add_column(col, justify="right")
    first = list(tasks.values())[: args.solutions]
    naive = naive_rate(first) if {"value", "pytest"} & set(args.graders) else None
    failures = 0
    for backend in args.backends:
        with make_sandbox(backend, max_workers=2) as sandbox:
            for grader in args.graders:
                if grader in ("value", "pytest"):
                    rows = suite_rows(sandbox, grader, tasks, args.sweep_tasks, args.canonical)
                    canon = [_sample(t, {"solution.py": t.reference}) for t in first]
                    _, wall = _grade(sandbox, grader, canon, warm=True)
                    rate = len(first) / wall
                    speed.add_row(
                        grader, backend, f"{rate:.2f} rewards/s", f"naive pytest {naive:.2f}/s", f"{rate / naive:.1f}x"
                    )
                elif grader == "swe":
                    rows, new, old = swe_rows(sandbox)
                    speed.add_row(
                        "swe", backend, f"{new:.2f} s/repair", f"suite alone {old:.2f} s", f"{new / old:.1f}x"
                    )
                else:
                    rows, new, old = agent_rows(sandbox)
                    speed.add_row(
                        "agent", backend, f"{new:.2f} s/verdict", f"exit status {old:.2f} s", f"{new / old:.1f}x"
                    )
                table.add_row(
                    grader,
                    backend,
                    str(rows["hacks"]),
                    str(len(rows["paid"])),
                    str(rows["honest"]),
                    str(len(rows["penalised"])),
                )
                for label in ("paid", "penalised"):
                    if rows[label]:
                        console.print(f"[red]{grader}/{backend} {label}: {rows[label][:8]}")
                        failures += grader != "pytest"
    console.print(table)
    console.print(speed)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
