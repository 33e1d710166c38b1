"""What the turn-KL term's locality guards cost per step: the term as it was (turn t only), with the KL-to-start anchor
on the other turns, with the proximal clipped update, and the drift matrix's measurement on the held-aside episodes.

The bundled model with LoRA, the episodes of ``distill_step.py`` (``--turns`` assistant turns of ``--turn-tokens``
tokens, each followed by a ``--obs-tokens``-token observation; the hint at the middle turn), the live teacher. A
step here is the term's forward and backward over every target (and anchor row), as one micro-batch; the drift
matrix is one measurement of ``--held`` episodes (a forward with the adapter and one without per episode, and the
target turn's teacher and student), which the trainer takes once per step.

    .venv/bin/python benchmarks/turn_kl_guards.py
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

from distill_step import episodes
from rich.console import Console
from rich.table import Table


def main() -> None:
    from propel.lit_modules.distill import TurnKLDistillModule
    from propel.lit_modules.turn_drift import HeldAside, measure_drift
    from propel.lit_modules.turn_kl import TurnKLSpec
    from propel.rollouts.episode_rows import episode_rows
    from propel.rollouts.hints import FunctionHints, Hint

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--held", type=int, default=2, help="held-aside episodes the drift matrix reads")
    parser.add_argument("--turns", type=int, default=4)
    parser.add_argument("--turn-tokens", type=int, default=32)
    parser.add_argument("--obs-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    hints = FunctionHints(lambda s: [Hint(args.turns // 2, "Answer with exactly one tool call.")])
    cases = {
        "turn t only (anchor 0: as before)": TurnKLSpec(control_hint=None),
        "+ anchor on the other turns": TurnKLSpec(control_hint=None, anchor_weight=1.0),
        "proximal (clipped) on turn t": TurnKLSpec(control_hint=None, proximal=True),
    }
    module = TurnKLDistillModule(hints=hints, turn_kl=cases["turn t only (anchor 0: as before)"])
    module.configure_model()
    samples = episodes(module.tokenizer, args.episodes + args.held, args.turns, args.turn_tokens, args.obs_tokens)
    train, held_out = samples[: args.episodes], samples[args.episodes :]

    def step() -> float:
        start = time.perf_counter()
        term = module.turn_term
        targets = term.targets(train)
        anchors = term.anchor_rows(train, targets)
        loss, _ = term.turn_kl_loss([*targets, *anchors], term.turn_norm(train, targets, anchors))
        loss.backward()
        module.policy.zero_grad(set_to_none=True)
        return time.perf_counter() - start

    held = [HeldAside(episode_rows(s), module.turn_term.splicer.target(s, i, Hint(args.turns // 2, "x"))) for i, s in
            enumerate(held_out)]  # fmt: skip

    def drift() -> float:
        start = time.perf_counter()
        measure_drift(module.turn_term, held)
        return time.perf_counter() - start

    results = {}
    for name, spec in cases.items():
        module.turn_kl = spec
        step()  # warm-up
        results[name] = [step() for _ in range(args.repeats)]
    drift()
    results[f"drift matrix, {args.held} held-aside episodes"] = [drift() for _ in range(args.repeats)]

    title = (f"Turn-KL guards, {args.episodes} episodes x {args.turns} turns ({args.turn_tokens} + {args.obs_tokens} "
             f"tokens each), SmolLM2-135M + LoRA, CPU, {args.repeats} repeats")  # fmt: skip
    table = Table(title=title)
    for col in ("what", "seconds (95% CI)", "relative to turn t only"):
        table.add_column(col, justify="right")
    base = statistics.fmean(results["turn t only (anchor 0: as before)"])
    for name, times in results.items():
        ci = 1.96 * statistics.stdev(times) / math.sqrt(len(times)) if len(times) > 1 else 0.0
        mean = statistics.fmean(times)
        table.add_row(name, f"{mean:.2f} ± {ci:.2f}", f"{mean / base:.2f}x")
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
