"""Which triage component carries the advantage variance: each component's share (``propel.losses.advantage_shares``)
over GRPO groups that mix the honest answer, its paraphrase and red-team answers, in both reward modes.

One group per ticket: the honest answer, its paraphrase and ``--group - 2`` of the red-team cases of
``propel.testing.triage_attacks`` that apply to the ticket (drawn with ``--seed``), scored by the six default
components (weight 1 each) as GRPO scores a step (``CombinedReward``, what it could judge, group-scaled advantages).
A share is ``Cov(w_c r_c, R) / Var(R)`` within groups, averaged over them; the shares sum to 1. In ``content_first``
mode the style components are paid in proportion to resolution, so their values, and their shares, move with the
content; in ``independent`` mode (the seed's six independent components) they move on their own. These are graded
answers built to probe the reward, not a policy's samples: the table says what the reward steers toward when
completions differ this way; ``reward_components.csv`` in a run folder says what it steers toward in training.

    python benchmarks/reward_shares.py                 # 240 tickets, groups of 8, seed 0
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from rich.console import Console
from rich.table import Table

from propel.losses.advantage_shares import advantage_shares
from propel.losses.scorable import learnable
from propel.records import Sample
from propel.rewards import CombinedReward
from propel.rewards.triage import MODES, triage_rewards
from propel.tasks.triage import generate_tickets, ticket_context
from propel.testing.triage_attacks import CASES, honest, honest_paraphrase


def groups(tickets, size: int, seed: int) -> list[Sample]:
    """``size`` answers per ticket, group after group: honest, paraphrase, then red-team cases that apply."""
    rng = random.Random(seed)
    out = []
    for t in tickets:
        cases = [c for c in CASES if c.applies(t)]
        answers = [honest(t), honest_paraphrase(t), *(c.answer(t) for c in rng.sample(cases, size - 2))]
        out += [Sample(prompt="", completion=a, context=ticket_context(t)) for a in answers]
    return out


def shares(samples: list[Sample], size: int, mode: str) -> tuple[dict[str, float], float]:
    """Each component's share of the advantage variance, and the unscorable rate."""
    breakdown = CombinedReward(triage_rewards(mode))(samples)
    keep, _ = learnable(breakdown.judged(size), size)
    names = list(breakdown.components)
    parts = torch.stack([breakdown.weights[n] * breakdown.components[n] for n in names], dim=1)
    got = advantage_shares(parts, size, keep, "group")
    return {n: float(v) for n, v in zip(names, got, strict=True)}, 1.0 - float(keep.float().mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=240, help="generated tickets (one group each)")
    parser.add_argument("--group", type=int, default=8, help="answers per group (G)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    start = time.perf_counter()
    samples = groups(generate_tickets(args.n, args.seed), args.group, args.seed)
    results = {mode: shares(samples, args.group, mode) for mode in MODES}
    table = Table(title=f"Share of the advantage variance: {args.n} groups of {args.group} triage answers (seed "
                        f"{args.seed}); shares sum to 1")  # fmt: skip
    table.add_column("component")
    for mode in MODES:
        table.add_column(mode, justify="right")
    for name in results[MODES[0]][0]:
        table.add_row(name, *(f"{results[m][0][name]:+.3f}" for m in MODES))
    table.add_row("unscorable rate", *(f"{results[m][1]:.3f}" for m in MODES), end_section=True)
    console = Console()
    console.print(table)
    console.print(f"{len(samples)} answers scored twice in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
