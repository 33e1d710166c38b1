"""Does a hint at one turn teach the student that turn? A demo-scale experiment of turn-targeted KL distillation.

The run of ``configs/agent/distill.yaml`` (the bundled model on ``ShellTasks`` without the solved example, where
its usual mistake is to answer in prose instead of a tool call; ``ErrorHints`` targets that turn with a hint that
shows a call) is trained for ``--steps`` steps; before and after, on held-out tasks:

* the student's rate of a valid tool call at the first turn *without* the hint (``--samples`` draws; the teacher's
  rate, with the hint, for reference), with a 95% Wilson interval;
* how far the student moved on held-out episodes, as KL(before || after) per token on the first turn (the targeted
  kind) and on the second turn (not targeted unless it went wrong there too).

``--control`` trains a second run with an unrelated hint in place of the real one (the wrong-hint control).

    .venv/bin/python benchmarks/distill_hint.py --steps 6 --samples 32
"""

from __future__ import annotations

import argparse
import copy
import math

import torch
from rich.console import Console
from rich.table import Table

CONTROL_HINT = "Take a deep breath and read the task again."


def wilson(k: int, n: int) -> str:
    if n == 0:
        return "n/a"
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return f"{k}/{n} = {p:.2f} [{max(0.0, centre - half):.2f}, {min(1.0, centre + half):.2f}]"


def build(config: str, steps: int, episodes: int, hint: str | None):
    from propel.cli.lightning_cli import PropelCLI

    args = ["-c", "configs/grpo/base.yaml", "-c", config, f"--trainer.max_steps={steps}", "--trainer.logger=false",
            f"--model.init_args.episodes_per_context={episodes}"]  # fmt: skip
    if hint is not None:
        args.append(f"--model.init_args.hints.init_args.tool_error={hint}")
    cli = PropelCLI(args=args, run=False)
    return cli.model, cli.datamodule


def first_turn_rate(module, contexts, n: int, hint: str | None) -> tuple[int, int]:
    """Valid tool calls among ``n`` first-turn samples per context (hint spliced in when given)."""
    from propel.engines.base import Prompt
    from propel.engines.tool_calls import CLOSE, ToolCall, check_arguments, parse_tool_call
    from propel.envs import ToolEnv
    from propel.rollouts.conversation import Conversation

    env = ToolEnv()
    sampling = copy.deepcopy(module.sampling)
    sampling.n, sampling.stop = n, [CLOSE]
    prompts = []
    for c in contexts:
        conv = Conversation(module.tokenizer, [{"role": "system", "content": env.system_prompt}, *c.prompt.messages],
                            env.tools)  # fmt: skip
        ids = conv.ids if hint is None else module.splicer.splice(list(conv.ids), hint)
        prompts.append(Prompt(token_ids=list(ids)))
    with module.eval_mode():
        groups = module.engine.generate(prompts, sampling)
    ok = 0
    for group in groups:
        for out in group:
            call = parse_tool_call(out.text)
            ok += isinstance(call, ToolCall) and check_arguments(call, env.tools) is None
    return ok, n * len(contexts)


def turn_logits(module, episodes):
    """Per assistant turn k (0, 1): the student's logits on that turn's tokens of each held-out episode."""
    from propel.rollouts.hints import turn_context

    out = {}
    for k in (0, 1):
        rows = [turn_context(s, k, i) for i, s in enumerate(episodes) if sum(t.trainable for t in s.all_turns) > k]
        if not rows:
            continue
        lengths = [len(ids) for _, ids in rows]
        with module.eval_mode(), torch.no_grad():
            logits = module._turn_logits([prefix + ids for prefix, ids in rows], lengths, "student")
        out[k] = (logits, module._mask(lengths))
    return out


def main() -> None:
    import lightning.pytorch as pl

    from propel.losses.distillation import DivergenceSpec, masked_mean, token_divergence
    from propel.rollouts.episode_runner import EpisodeRunner
    from propel.sandbox import LocalSandbox
    from propel.tasks.shell import ShellTasks

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/agent/distill.yaml")
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--samples", type=int, default=48, help="first-turn draws per measurement (over 4 tasks)")
    parser.add_argument("--episodes", type=int, default=2, help="episodes per task per training step")
    parser.add_argument("--control", action="store_true", help="also train with an unrelated hint")
    args = parser.parse_args()

    held_out = ShellTasks(["create_file"], demonstration=False).contexts(4, seed=12345)
    rows = []
    runs = [("hint", None)] + ([("control", CONTROL_HINT)] if args.control else [])
    for name, hint_override in runs:
        pl.seed_everything(0)
        module, data = build(args.config, args.steps, args.episodes, hint_override)
        module.configure_model()
        hint = hint_override or module.hints.tool_error
        per_task = max(1, args.samples // len(held_out))
        with LocalSandbox(max_workers=1) as box:
            runner = EpisodeRunner(module.engine, data.make_env, box, concurrency=8)
            sampling = copy.deepcopy(module.sampling)
            sampling.n = 2
            groups, _ = runner.run(held_out, sampling)
        episodes = [s for g in groups for s in g]
        torch.manual_seed(1)
        before = first_turn_rate(module, held_out, per_task, None)
        teacher = first_turn_rate(module, held_out, per_task, hint)
        logits_before = turn_logits(module, episodes)
        trainer = pl.Trainer(max_steps=args.steps, accelerator="cpu", logger=False, enable_checkpointing=False,
                             enable_progress_bar=True, enable_model_summary=False)  # fmt: skip
        trainer.fit(module, datamodule=data)
        torch.manual_seed(1)
        after = first_turn_rate(module, held_out, per_task, None)
        logits_after = turn_logits(module, episodes)
        moved = {}
        for k, (lb, mask) in logits_before.items():
            la, _ = logits_after[k]
            moved[k] = float(masked_mean(token_divergence(la, lb, DivergenceSpec("forward_kl")), mask))
        kl = [f"{moved.get(k, float('nan')):.4f}" for k in (0, 1)]
        short = hint[:60] + ("..." if len(hint) > 60 else "")
        rows.append([name, short, wilson(*before), wilson(*teacher), wilson(*after), *kl])
    table = Table(title=f"Turn-targeted distillation, {args.steps} steps ({args.config}); first-turn valid-call rate")
    for col in ("run", "hint", "student before", "teacher (with hint)", "student after", "KL turn 0", "KL turn 1"):
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    Console(width=220).print(table)


if __name__ == "__main__":
    main()
