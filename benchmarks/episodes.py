"""Agent episodes: sequential vs concurrent, on the same workload, in one run.

The same tasks (``ShellTasks``, ``ToolEnv``, ``group_size`` episodes each) are rolled out under three schedules:
``sequential`` (one episode at a time), ``rounds`` (all episodes together: one batched generation per turn, tool
calls in parallel) and ``async`` (the engine takes whichever episodes are waiting, overlapping tool calls), by two
policies: ``scripted`` (a fixed, correct sequence of real tool calls and no generation cost: what the sandbox side
alone gains) and ``model`` (the bundled SmolLM2-135M-Instruct sampling with the HF engine). Each cell is the mean
of ``--repeats`` runs with a 95% interval; ``environment s`` sums the episodes' environment time (container starts,
tool calls, verifiers), so it exceeds the wall time when they overlap; ``training s`` is one LoRA policy-gradient step
(forward + backward, DAPO loss on assistant tokens) on the cell's last episodes. Docker by default:

    .venv/bin/python benchmarks/episodes.py                   # --sandbox local for bubblewrap
"""

from __future__ import annotations

import argparse
import math
import statistics
from functools import partial

from rich.console import Console
from rich.table import Table

SCHEDULES = {"sequential": (1, "rounds"), "rounds": (8, "rounds"), "async": (8, "async")}


def _scripted_engine(tokenizer):
    """Solves ``create_file`` tasks: reads the task, writes the file with bash, checks it, submits."""
    import re

    from propel.engines.scripted import ScriptedEngine
    from propel.engines.tool_calls import ToolCall, format_tool_call

    def script(prompt: str) -> str:
        name, word = re.findall(r"Create a file named (\S+) that contains exactly the word (\w+)", prompt)[-1]
        steps = [
            ToolCall("bash", {"command": f"echo {word} > {name}"}),
            ToolCall("read_file", {"path": name}),
            ToolCall("submit", {}),
        ]
        return format_tool_call(steps[min(prompt.count("<|im_start|>assistant") - 3, 2)])  # 2 in the demonstration

    return ScriptedEngine(tokenizer, script)


def _mean_ci(values: list[float]) -> str:
    mean = statistics.fmean(values)
    if len(values) < 2:
        return f"{mean:.2f}"
    return f"{mean:.2f} ± {1.96 * statistics.stdev(values) / math.sqrt(len(values)):.2f}"


def main() -> None:
    import torch

    from propel.engines.engine import SamplingSpec
    from propel.engines.hf import HFEngine
    from propel.envs import ToolEnv
    from propel.models import load_model
    from propel.rollouts.episode_runner import EpisodeRunner
    from propel.sandbox import make_sandbox
    from propel.tasks.shell import ShellTasks

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandbox", default="docker", choices=["docker", "local"])
    parser.add_argument("--tasks", type=int, default=2)
    parser.add_argument("--group-size", type=int, default=4, help="episodes per task")
    parser.add_argument("--turns", type=int, default=3, help="turn budget per episode")
    parser.add_argument("--tokens", type=int, default=32, help="new tokens per assistant turn (model policy)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--policies", nargs="+", default=["scripted", "model"], choices=["scripted", "model"])
    args = parser.parse_args()

    model, tokenizer = load_model("smollm2-135m-instruct")
    engines = {"scripted": _scripted_engine(tokenizer), "model": HFEngine(model, tokenizer)}
    contexts = ShellTasks(["create_file"]).contexts(args.tasks, seed=5)
    sampling = SamplingSpec(n=args.group_size, max_new_tokens=args.tokens, temperature=0.7, logprobs=True)
    sandbox = make_sandbox(args.sandbox, max_workers=1)
    rows = []
    policy_model = _lora(model)
    try:
        for policy in args.policies:
            base = None
            for name, (concurrency, schedule) in SCHEDULES.items():
                runs = []
                for r in range(args.repeats):
                    torch.manual_seed(r)
                    runner = EpisodeRunner(engines[policy], partial(ToolEnv, max_turns=args.turns), sandbox,
                                           concurrency=concurrency, schedule=schedule)  # fmt: skip
                    groups, times = runner.run(contexts, sampling)
                    samples = [s for g in groups for s in g]
                    runs.append((len(samples) / times.wall_s, times, samples))
                rate = [x[0] for x in runs]
                train_s = _training_step_seconds(policy_model, tokenizer, runs[-1][2])
                base = base or statistics.fmean(rate)
                rows.append([
                    policy, name, _mean_ci(rate), f"{statistics.fmean(rate) / base:.2f}x",
                    _mean_ci([x[1].wall_s for x in runs]), _mean_ci([x[1].generation_s for x in runs]),
                    _mean_ci([x[1].environment_s for x in runs]), f"{train_s:.1f}",
                    f"{statistics.fmean(sum(s.info['turns'] for s in x[2]) / len(x[2]) for x in runs):.2f}",
                    f"{statistics.fmean(sum(s.info['reward'] for s in x[2]) / len(x[2]) for x in runs):.2f}",
                ])  # fmt: skip
    finally:
        sandbox.close()
    table = Table(title=f"Agent episodes: {args.tasks} tasks x {args.group_size} episodes, <= {args.turns} turns, "
                        f"{args.sandbox} sandbox, {args.repeats} runs per cell")  # fmt: skip
    for col in ("policy", "schedule", "episodes/s", "speed-up", "wall s", "generation s", "environment s",
                "training s", "turns/episode", "solved"):  # fmt: skip
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*row)
    Console(width=200).print(table)


def _lora(model):
    from propel.models import apply_lora

    return apply_lora(model)


def _training_step_seconds(policy, tokenizer, samples) -> float:
    """Wall time of one policy-gradient step (forward + backward over all tokens, assistant tokens in the loss)."""
    import time

    import torch

    from propel.losses.logprobs import token_logprobs
    from propel.losses.policy_gradient import LossSpec, policy_loss
    from propel.models import span_logits
    from propel.rollouts import pack

    batch = pack(samples, torch.randn(len(samples)), tokenizer.pad_token_id)
    start = time.perf_counter()
    for rows in torch.arange(batch.input_ids.shape[0]).split(4):  # a step-wise episode packs to several rows
        sub = batch.select(rows)
        picked = span_logits(policy, sub.input_ids, sub.attention_mask, sub.starts, sub.response_ids.shape[1])
        logp, _ = token_logprobs(picked, sub.response_ids)
        out = policy_loss(logp, logp.detach(), sub.advantages, sub.loss_mask, LossSpec("dapo", beta=0.0))
        out.loss.backward()
    seconds = time.perf_counter() - start
    policy.zero_grad(set_to_none=True)  # no optimizer step: the sampling policy stays as it was
    return seconds


if __name__ == "__main__":
    main()
