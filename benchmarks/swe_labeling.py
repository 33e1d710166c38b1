"""The procedural generator's label distribution on the SWE repos with a model solver.

Procedural bugs (seed 0) of ``--repos`` go through the same chain as ``propel predict -c configs/swe/label.yaml``:
``BugValidator`` (per-file revert check included), then ``--trials`` repair episodes per valid bug (``ToolEnv`` in
fresh sandbox sessions, the model as the agent), graded by ``grade_repair``. Prints per repo: candidates, valid bugs,
the solve-count histogram (0..n) and the share labeled positive (solve rate strictly between 0 and 1), the repair
failure reasons and the wall time; the rows stay in ``--out`` (a rerun resumes).

    .venv/bin/python benchmarks/swe_labeling.py --repos parse,inflection --bugs 3 --trials 3
"""

from __future__ import annotations

import argparse
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repos", default="parse,inflection")
    parser.add_argument("--bugs", type=int, default=3, help="procedural candidates per repo")
    parser.add_argument("--trials", type=int, default=3, help="repair episodes per valid bug")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--max-turns", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=256, help="per assistant turn")
    parser.add_argument("--out", default="runs/swe_labeling/pool")
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (on a loaded 2-core machine 2 threads ran 10x slower)"
    )
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)

    from lightning.pytorch import Trainer
    from rich.console import Console
    from rich.table import Table

    from propel.callbacks.pool_writer import PoolWriter
    from propel.datamodules.task_pool import TaskPoolDataModule
    from propel.domains.swe.domain import SweDomain
    from propel.domains.trials import SolverSpec
    from propel.envs import ToolEnv
    from propel.lit_modules.labeling import LabelingModule
    from propel.pools import read_pool
    from propel.rollouts import AgentSolver

    repos = args.repos.split(",")
    domain = SweDomain(repos)
    hi = max(1, args.trials - 1)
    module = LabelingModule(
        domain,
        generator=args.model,
        solver=SolverSpec(n_trials=args.trials, band=(1, hi), max_new_tokens=args.max_new_tokens),
        solver_agent=AgentSolver(
            lambda: ToolEnv(max_turns=args.max_turns, command_timeout_s=60, max_collect_chars=400_000),
            concurrency=args.trials,
            max_context_tokens=4096,
        ),
    )
    trainer = Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, callbacks=[PoolWriter(args.out)])
    data = TaskPoolDataModule(domain, pool_dir=args.out, n_tasks=args.bugs * len(repos), batch_size=len(repos))
    start = time.perf_counter()
    trainer.predict(module, datamodule=data, return_predictions=False)
    wall = time.perf_counter() - start

    pool = read_pool(args.out)
    table = Table(title=f"SWE procedural bugs, {args.model} repair agent, n={args.trials} (wall {wall:.0f} s)")
    for col in ("repo", "candidates", "valid", "invalid reasons", "solve-count hist", "positive (0<rate<1)"):
        table.add_column(col)
    for repo, rows in pool.groupby("group"):
        valid = rows[rows["valid"]]
        hist = [int((valid["solve_count"] == k).sum()) for k in range(args.trials + 1)]
        reasons = rows.loc[~rows["valid"], "reason"].value_counts().to_dict()
        table.add_row(
            repo, str(len(rows)), str(len(valid)), str(reasons), str(hist), f"{int(valid['label'].sum())}/{len(valid)}"
        )
    console = Console(width=150)
    console.print(table)
    console.print(f"repair failures by reason: {dict(domain.repair_reasons)}")
    console.print(f"solver tokens: {int(pool['solver_tokens'].sum())}")


if __name__ == "__main__":
    main()
