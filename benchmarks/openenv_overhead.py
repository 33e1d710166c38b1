"""GRPO steps/s on an OpenEnv environment: in-process vs over OpenEnv's server (the same environment, the same work).

Each step is a real multi-turn GRPO step (``GRPOModule`` on a tiny random policy, ``EpisodeDataModule`` with
``OpenEnvAgentEnv``): ``--contexts`` tasks x ``--group`` episodes rolled out, rewarded and trained on. The actions
come from a scripted policy that always writes a valid call (a random model writes none, and then the environment
would never be stepped), so every episode resets and steps the environment: propel's triage environment (``triage``,
one ``submit_resolution`` per ticket, graded by the six rewards) or HumanEval (``humaneval``, graded by value in the
sandbox). ``server`` runs the same environment behind ``propel serve-env`` on loopback (a child process, WebSocket
sessions) and pays the connection, the JSON round trips and the server's scheduling. The modes alternate over
``--repeats``; a warm-up step per run is not counted. The table gives the median seconds per step and steps/s, the
median rollout time per step (where the server's cost lands: training is the same work in both modes, and its time
varies more than the whole overhead), the environment calls per step and the server's overhead per step (rollout
time, server minus in-process) and per environment call:

    .venv/bin/python benchmarks/openenv_overhead.py                 # triage, 3 steps x 2 repeats per mode
    .venv/bin/python benchmarks/openenv_overhead.py --env humaneval --steps 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from functools import partial

from rich.console import Console
from rich.table import Table

MODES = ("in_process", "server")
PARTS = ("wall_s", "generation_s", "environment_s", "training_s")
"""Where a step's time went (the GRPO module's ``train/time/*``): ``wall_s`` is the rollout's wall time (episodes run
together), ``environment_s`` sums the episodes' environment calls."""
ENVIRONMENTS = {
    "triage": "propel.served.triage.TriageEnvironment",
    "humaneval": "propel.served.humaneval.HumanEvalEnvironment",
}


def _policy(env: str):
    """A scripted policy that answers every task right with one valid call of the environment's tool."""
    import itertools
    import re

    from propel.engines.tool_calls import ToolCall, format_tool_call

    turn = itertools.count()  # every other answer a little worse, so a group's rewards differ and each step trains

    if env == "triage":
        from propel.tasks.triage import TriageTickets

        tickets = {t.ticket_id: t for t in TriageTickets(split=None).tickets}

        def answer(prompt: str) -> str:
            t = tickets[re.findall(r"Ticket (T\d+) \(", prompt)[-1]]
            confidence = 0.9 if next(turn) % 2 else 0.5
            args = {"resolution": t.gold_resolution, "citations": list(t.gold_ids), "confidence": confidence}
            return format_tool_call(ToolCall("submit_resolution", {**args, "escalate": t.escalate}))

        return answer
    from propel.tasks.humaneval import HumanEvalTasks

    tasks = [("".join(t.prompt.split()), t) for t in HumanEvalTasks().tasks]

    def solve(prompt: str) -> str:
        bare = "".join(prompt.split())  # whitespace aside: decoding the prompt's tokens may space it differently
        task = next(t for text, t in tasks if text in bare)
        code = task.reference if next(turn) % 2 else task.prompt + "    raise NotImplementedError\n"
        return format_tool_call(ToolCall("submit_solution", {"code": code}))

    return solve


class _Timer:
    """Per-step wall time and the rollout's environment time (a Lightning callback)."""

    def __init__(self, script) -> None:
        from lightning.pytorch.callbacks import Callback

        timer = self

        class Hooks(Callback):
            def on_train_start(self, trainer, pl_module):
                from propel.engines.scripted import ScriptedEngine

                pl_module.engine = ScriptedEngine(pl_module.tokenizer, script)

            def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
                timer.start = time.perf_counter()

            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                timer.steps.append(time.perf_counter() - timer.start)
                samples = pl_module.rollout_state.samples
                timer.calls.append(sum(1 + sum(t.role == "tool" for t in s.turns) for s in samples))
                timer.failures.append(sum(s.infra_error is not None for s in samples))
                metrics = trainer.callback_metrics
                timer.parts.append({k: float(metrics.get(f"train/time/{k}", 0.0)) for k in PARTS})

        self.callback, self.start = Hooks(), 0.0
        self.steps: list[float] = []
        self.calls: list[int] = []
        self.failures: list[int] = []
        self.parts: list[dict[str, float]] = []


def run_mode(env_name: str, where: str, model_dir: str, args) -> _Timer:
    """``args.steps + 1`` GRPO steps against ``where`` (an import path or a server URL); the first is a warm-up."""
    import lightning.pytorch as pl

    from propel.datamodules.agent_episodes import EpisodeDataModule
    from propel.envs import OpenEnvAgentEnv
    from propel.lit_modules.grpo import GRPOModule
    from propel.losses.policy_gradient import LossSpec
    from propel.models.lora import LoRASpec
    from propel.rewards import TurnRewards
    from propel.tasks.openenv import OpenEnvTasks

    pl.seed_everything(0)
    module = GRPOModule(
        model=model_dir,
        lora=LoRASpec(r=4, alpha=8),
        rewards=[TurnRewards()],
        group_size=args.group,
        max_new_tokens=512,
        lr=1e-4,
        micro_batch_size=args.group * args.contexts,
        loss=LossSpec("dapo", beta=0.0),
    )
    data = EpisodeDataModule(
        partial(OpenEnvAgentEnv, where, max_turns=2),
        OpenEnvTasks(),
        contexts_per_step=args.contexts,
        concurrency=args.group * args.contexts,
        max_context_tokens=4096,
    )
    timer = _Timer(_policy(env_name))
    trainer = pl.Trainer(
        max_steps=args.steps + 1,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=[timer.callback],
    )
    trainer.fit(module, datamodule=data)
    for series in (timer.steps, timer.calls, timer.failures, timer.parts):
        del series[0]  # the warm-up step
    return timer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", choices=sorted(ENVIRONMENTS), default="triage")
    parser.add_argument("--steps", type=int, default=3, help="timed GRPO steps per run (after one warm-up step)")
    parser.add_argument("--repeats", type=int, default=2, help="runs per mode, alternating")
    parser.add_argument("--contexts", type=int, default=2, help="tasks per step")
    parser.add_argument("--group", type=int, default=4, help="episodes per task (GRPO group)")
    parser.add_argument("--json", default=None, help="also write the results here")
    args = parser.parse_args(argv)

    from propel.models.tiny import save_tiny_model
    from propel.served.process import ServerProcess

    times: dict[str, list[float]] = {m: [] for m in MODES}
    calls: dict[str, list[int]] = {m: [] for m in MODES}
    failures = dict.fromkeys(MODES, 0)
    parts: dict[str, list[dict[str, float]]] = {m: [] for m in MODES}
    with tempfile.TemporaryDirectory() as tmp, ServerProcess(args.env) as server:
        model_dir = str(save_tiny_model(f"{tmp}/tiny"))
        for _ in range(args.repeats):
            for mode in MODES:
                where = ENVIRONMENTS[args.env] if mode == "in_process" else server.url
                timer = run_mode(args.env, where, model_dir, args)
                times[mode] += timer.steps
                calls[mode] += timer.calls
                failures[mode] += sum(timer.failures)
                parts[mode] += timer.parts

    episodes = args.contexts * args.group
    table = Table(title=f"GRPO on OpenEnv {args.env}: {args.contexts} tasks x {args.group} episodes per step")
    columns = ("mode", "steps", "s/step", "steps/s", "rollout s/step", "env calls/step", "overhead ms/step", "ms/call")
    for column in columns:
        table.add_column(column, justify="left" if column == "mode" else "right")
    rollout = {m: statistics.median(p["wall_s"] for p in parts[m]) for m in MODES}
    rows = {}
    for mode in MODES:
        median, per_step_calls = statistics.median(times[mode]), statistics.fmean(calls[mode])
        overhead = (rollout[mode] - rollout["in_process"]) * 1000
        rows[mode] = {
            "steps": len(times[mode]),
            "s_per_step": median,
            "steps_per_s": 1 / median,
            "rollout_s_per_step": rollout[mode],
            "training_s_per_step": statistics.median(p["training_s"] for p in parts[mode]),
            "env_calls_per_step": per_step_calls,
            "overhead_ms_per_step": overhead,
            "overhead_ms_per_call": overhead / per_step_calls,
            "infra_failures": failures[mode],
        }
        table.add_row(
            mode,
            str(len(times[mode])),
            f"{median:.3f}",
            f"{1 / median:.3f}",
            f"{rollout[mode]:.3f}",
            f"{per_step_calls:.0f}",
            "-" if mode == "in_process" else f"{overhead:+.0f}",
            "-" if mode == "in_process" else f"{overhead / per_step_calls:+.1f}",
        )
    Console(width=160).print(table)
    print(
        f"{episodes} episodes per step; env calls = resets + steps; overhead = the server's rollout time minus the "
        f"in-process one (medians; the rest of a step, training, is the same work); infra failures: {failures}"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "rows": rows}, f, indent=2)
    return 0 if not any(failures.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
