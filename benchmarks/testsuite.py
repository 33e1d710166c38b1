"""Test-suite reward throughput: ``TestSuiteReward`` (pristine suite + canary in the sandbox, coverage.py, hack
detectors; pytest imported once per batch, one fork per solution) against the naive baseline, plain ``pytest`` in a
fresh process per solution (no sandbox, no coverage, no detectors), both with 2 workers, on the same solutions: the
HumanEval reference solutions of the first ``--solutions`` tasks. Each row grades all of them once, after a warm-up,
and checks every solution passed all its tests (so the runners agree).

    .venv/bin/python benchmarks/testsuite.py --solutions 48 --backends local docker
    .venv/bin/python benchmarks/testsuite.py --corpus --backends local docker   # the hack corpus table instead
    .venv/bin/python benchmarks/testsuite.py --bundled-tasks 20 --bundled-samples 4   # the bundled model's pass rate
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from rich.console import Console
from rich.table import Table


def samples_for(tasks):
    from propel.rollouts.record import Sample

    return [
        Sample(
            prompt="", completion="", context=t.single_turn_context(), artifacts={"files": {"solution.py": t.reference}}
        )
        for t in tasks
    ]


def naive_one(task) -> bool:
    """Plain pytest in a fresh process on one solution: True when every required test passed."""
    from propel.testsuite import parse_junit, pristine_ini

    data = task.single_turn_context().data
    with tempfile.TemporaryDirectory() as root:
        files = {"solution.py": task.reference, "pytest.ini": pristine_ini(), **data["tests"]}
        for name, text in files.items():
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
    required = data["visible_tests"] + data["hidden_tests"]
    return all(outcomes.get(t) == "passed" for t in required)


def time_naive(tasks, workers: int) -> tuple[float, int]:
    start = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        ok = sum(pool.map(naive_one, tasks))
    return time.perf_counter() - start, ok


def time_reward(tasks, sandbox, batch_size: int) -> tuple[float, int]:
    from propel.rewards import TestSuiteReward

    reward = TestSuiteReward(sandbox=sandbox, batch_size=batch_size, timeout_s=30.0)
    reward(samples_for(tasks[:2]))  # warm-up: workers/containers started, the vendored zip built
    samples = samples_for(tasks)
    start = time.perf_counter()
    reward(samples)
    wall = time.perf_counter() - start
    ok = sum(s.info["test_suite"]["pass_rate"] == 1.0 and not s.info["test_suite"]["flags"] for s in samples)
    return wall, ok


def corpus_table(backend: str, workers: int) -> Table:
    """The hack corpus graded on one backend: entry x reward x pass rate x flags x verdict."""
    from propel.domains.humaneval import load_humaneval
    from propel.domains.humaneval.corpus import AGENT_TASK, CORPUS, SINGLE_TASK, entry_files
    from propel.rewards import TestSuiteReward
    from propel.rollouts.record import Sample
    from propel.sandbox import make_sandbox

    tasks = {t.task_id: t for t in load_humaneval()}
    samples = []
    for entry in CORPUS:
        task = tasks[SINGLE_TASK if entry.mode == "single" else AGENT_TASK]
        ctx = task.single_turn_context() if entry.mode == "single" else task.agent_context()
        samples.append(Sample(prompt="", completion="", context=ctx, artifacts={"files": entry_files(entry, task)}))
    with make_sandbox(backend, max_workers=workers) as sandbox:
        rewards = TestSuiteReward(sandbox=sandbox)(samples).tolist()
    table = Table(title=f"hack corpus on the {backend} sandbox ({SINGLE_TASK} single-turn, {AGENT_TASK} agent)")
    for col in ("solution", "kind", "reward", "pass rate", "coverage", "flags", "verdict"):
        table.add_column(col, justify="right" if col in ("reward", "pass rate", "coverage") else "left")
    for entry, reward, s in zip(CORPUS, rewards, samples, strict=True):
        info = s.info["test_suite"]
        flags = ", ".join(info["flags"]) or "-"
        table.add_row(
            entry.name,
            entry.kind,
            f"{reward:.3f}",
            f"{info['pass_rate']:.2f}",
            f"{info['coverage']:.2f}",
            flags,
            info["reason"][:60],
        )
    return table


def bundled_pass_rate(n_tasks: int, n_samples: int, max_new_tokens: int) -> Table:
    """The bundled SmolLM2-135M-Instruct on the first ``n_tasks`` HumanEval tasks (single-turn, the training prompt,
    temperature 1.0, ``n_samples`` each), graded by ``TestSuiteReward`` in the local sandbox."""
    import torch

    from propel.datamodules.code_solutions import CodeSolutionEnv
    from propel.domains.humaneval import HumanEvalTasks
    from propel.engines.base import SamplingSpec
    from propel.engines.factory import make_engine
    from propel.rewards import TestSuiteReward
    from propel.rollouts.single_turn import sample_single_turn

    torch.set_num_threads(1)  # see tests/lit_modules/test_grpo_code.py: 2 spinning threads on a shared 2-core box
    torch.manual_seed(0)
    tasks = HumanEvalTasks()
    contexts = [t.single_turn_context() for t in tasks.tasks[:n_tasks]]
    engine = make_engine("hf", "smollm2-135m-instruct", dtype="float32")
    start = time.perf_counter()
    samples = [
        s
        for group in sample_single_turn(
            engine, contexts, SamplingSpec(n=n_samples, max_new_tokens=max_new_tokens, temperature=1.0)
        )
        for s in group
    ]
    generated = time.perf_counter() - start
    CodeSolutionEnv().score(samples)
    reward = TestSuiteReward()
    rewards = reward(samples)
    reward.close()
    infos = [s.info["test_suite"] for s in samples]
    table = Table(title=f"bundled SmolLM2-135M-Instruct on HumanEval/0-{n_tasks - 1}, {n_samples} samples each")
    for col in ("samples", "parse", "suite ran", "tests passed", "all passed", "mean pass rate", "mean reward"):
        table.add_column(col, justify="right")
    table.add_column("flags")
    flags: dict[str, int] = {}
    for info in infos:
        for flag in info["flags"]:
            flags[flag] = flags.get(flag, 0) + 1
    table.add_row(
        str(len(samples)),
        f"{sum(s.valid for s in samples)}",
        f"{sum(i['status'] == 'ran' for i in infos)}",
        f"{sum(i.get('passed', 0) for i in infos)}/{sum(i.get('required', 0) for i in infos)}",
        f"{sum(i['pass_rate'] == 1.0 for i in infos)}",
        f"{sum(i['pass_rate'] for i in infos) / len(infos):.3f}",
        f"{float(rewards.mean()):.3f}",
        ", ".join(f"{k}: {v}" for k, v in sorted(flags.items())) or "-",
    )
    table.caption = f"generation {generated:.0f} s; statuses: " + ", ".join(
        f"{k}: {v}"
        for k, v in sorted({i["status"]: sum(j["status"] == i["status"] for j in infos) for i in infos}.items())
    )
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--solutions", type=int, default=48)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--backends", nargs="+", default=["local", "docker"], choices=["local", "docker"])
    parser.add_argument("--corpus", action="store_true", help="print the hack corpus table instead")
    parser.add_argument("--bundled-tasks", type=int, default=0, help="measure the bundled model's pass rate instead")
    parser.add_argument("--bundled-samples", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=192)
    args = parser.parse_args()
    if args.bundled_tasks:
        Console(width=160).print(bundled_pass_rate(args.bundled_tasks, args.bundled_samples, args.max_new_tokens))
        return
    if args.corpus:
        for backend in args.backends:
            Console(width=200).print(corpus_table(backend, args.workers))
        return

    from propel.domains.humaneval import load_humaneval
    from propel.sandbox import make_sandbox

    tasks = list(load_humaneval()[: args.solutions])
    n = len(tasks)
    rows = []
    base_wall, base_ok = time_naive(tasks, args.workers)
    rows.append((f"plain pytest, fresh process per solution ({args.workers} at a time)", base_wall, base_ok))
    for backend in args.backends:
        with make_sandbox(backend, max_workers=args.workers) as sandbox:
            sandbox.warm_up()
            for batch in args.batch_sizes:
                wall, ok = time_reward(tasks, sandbox, batch)
                rows.append((f"TestSuiteReward, {backend} sandbox, batch {batch}", wall, ok))
    table = Table(title=f"test-suite rewards/s: {n} HumanEval reference solutions, {args.workers} workers")
    for col in ("runner", "wall s", "rewards/s", "vs plain pytest", "all tests passed"):
        table.add_column(col, justify="left" if col == "runner" else "right")
    for name, wall, ok in rows:
        table.add_row(name, f"{wall:.1f}", f"{n / wall:.2f}", f"{base_wall / wall:.2f}x", f"{ok}/{n}")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
