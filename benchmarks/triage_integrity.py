"""Triage reward integrity: every red-team case against the honest answer, on the generated tickets.

For each case of ``propel.rewards.triage.redteam.CASES`` (six default components at weight 1, maximum 6): its mean
total, the honest answer's mean total on the same tickets, the largest share of the honest total it reaches on any
ticket, the component it must lose on with the smallest gap to the honest answer on that component over the
tickets, and whether it holds (below honest on every ticket, the named gap >= 0.2, and a content-free case at or
below 60% of honest everywhere: the checks ``tests/rewards/test_triage_redteam.py`` asserts).

    python benchmarks/triage_integrity.py              # 240 tickets, seed 0
    python benchmarks/triage_integrity.py --n 480 --seed 1
"""

from __future__ import annotations

import argparse
import time

import torch
from rich.console import Console
from rich.table import Table

from propel.rewards import CombinedReward
from propel.rewards.triage import triage_rewards
from propel.rewards.triage.redteam import CASES, CONTENT_FREE_SHARE, honest
from propel.rollouts.record import Sample
from propel.tasks.triage import generate_tickets, ticket_context

MARGIN = 0.2


def score(reward: CombinedReward, completions: list[str], tickets) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    samples = [
        Sample(prompt="", completion=c, context=ticket_context(t)) for c, t in zip(completions, tickets, strict=True)
    ]
    out = reward(samples)
    return out.total, out.components


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=240, help="generated tickets")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    start = time.perf_counter()
    tickets = generate_tickets(args.n, args.seed)
    reward = CombinedReward(triage_rewards())
    honest_total, honest_parts = score(reward, [honest(t) for t in tickets], tickets)
    table = Table(
        title=f"Triage red team: {len(CASES)} cases on {args.n} tickets (seed {args.seed}); honest answer "
        f"{float(honest_total.mean()):.2f} of 6 (min {float(honest_total.min()):.2f})"
    )
    for col in ("case", "tickets", "total", "honest total", "max share", "loses on", "min gap", "holds"):
        table.add_column(col, justify="left" if col in ("case", "loses on") else "right")
    failed = 0
    for case in CASES:
        index = [i for i, t in enumerate(tickets) if case.applies(t)]
        total, parts = score(reward, [case.answer(tickets[i]) for i in index], [tickets[i] for i in index])
        share = total / honest_total[index]
        gap = honest_parts[case.loses_on][index] - parts[case.loses_on]
        holds = bool((share < 1).all()) and float(gap.min()) >= MARGIN
        holds &= not case.content_free or float(share.max()) <= CONTENT_FREE_SHARE
        failed += not holds
        table.add_row(
            case.name + (" *" if case.content_free else ""),
            str(len(index)),
            f"{float(total.mean()):.2f}",
            f"{float(honest_total[index].mean()):.2f}",
            f"{float(share.max()):.0%}",
            case.loses_on,
            f"{float(gap.min()):.2f}",
            "yes" if holds else "NO",
        )
    console = Console(width=140)
    console.print(table)
    console.print(
        f"* content-free: capped at {CONTENT_FREE_SHARE:.0%} of the honest total on every ticket. "
        f"{len(CASES) - failed}/{len(CASES)} cases hold; {time.perf_counter() - start:.1f} s."
    )


if __name__ == "__main__":
    main()
