"""Triage reward integrity: every red-team case against the honest answer, on the generated tickets.

For each case of ``propel.testing.triage_attacks.CASES`` (six default components at weight 1, maximum 6): its mean
total, the honest answer's mean total on the same tickets, the smallest and the largest share of the honest total it
reaches on any ticket, the component it must lose on with the smallest gap to the honest answer on that component
over the tickets, and whether it holds (below honest on every ticket, the named gap >= 0.2, and a content-free case
at or below 60% of honest everywhere: the checks ``tests/rewards/test_triage_redteam.py`` asserts). The first row is
the honest answer in an engineer's own words (``redteam.honest_paraphrase``), which holds at >= 95% of the honest
total on every ticket. The footer counts honest answers penalised (the honest answer below the best total at its
confidence, or a paraphrase below 95% of it) and adversarial cases paid above 60% (content-free cases above the cap
on some ticket); both targets are 0. Reorderings of the steps are tried at confidence 0.9 and at 0, the best
confidence for an answer that is not a right fix (every other component ignores the confidence's value), one of them
with the wrong flag too; ``tests/rewards/test_triage_procedure.py`` sweeps every reordering over confidences 0 to 1
and both flags.

A second table (``mode_report``) gives the safety quantity of both reward modes (``propel.rewards.triage.mode``) on
one batch, every answer above (the honest answer, its paraphrase and every case on every ticket it applies to): the
share of accepted answers with no content (procedure 0) and their total relative to the honest answer on the same
tickets (``propel.rewards.triage.integrity``). Content-first caps it; ``independent``, the seed's six independent
components, does not.

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
from propel.rewards.triage import MODES, integrity, triage_rewards
from propel.rollouts.record import Sample
from propel.tasks.triage import generate_tickets, ticket_context
from propel.testing.triage_attacks import CASES, CONTENT_FREE_SHARE, HONEST_CONFIDENCE, honest, honest_paraphrase

MARGIN = 0.2
PARAPHRASE_SHARE = 0.95
"""The least an honest paraphrase must score, as a share of the honest answer's total, on every ticket."""


def score(reward: CombinedReward, completions: list[str], tickets) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    samples = [
        Sample(prompt="", completion=c, context=ticket_context(t)) for c, t in zip(completions, tickets, strict=True)
    ]
    out = reward(samples)
    return out.total, out.components


def batch(tickets) -> list[Sample]:
    """The honest answer and its paraphrase on every ticket, and every red-team case on every ticket it applies to."""
    answers = [(honest(t), t) for t in tickets] + [(honest_paraphrase(t), t) for t in tickets]
    answers += [(case.answer(t), t) for case in CASES for t in tickets if case.applies(t)]
    return [Sample(prompt="", completion=c, context=ticket_context(t)) for c, t in answers]


def mode_report(tickets, console: Console | None = None) -> dict[str, dict[str, float]]:
    """Per mode, the content-free share of the accepted answers of ``batch(tickets)`` and their total relative to the
    honest answer (``integrity.integrity``); printed as a table when ``console`` is given."""
    samples = batch(tickets)
    report = integrity(CombinedReward(triage_rewards()), samples, MODES, HONEST_CONFIDENCE)
    if console is not None:
        table = Table(
            title=f"Content-free answers paid, per reward mode: {len(samples)} answers (honest, paraphrase, red team) "
            f"on {len(tickets)} tickets"
        )
        for col in ("mode", "content-free share", "their total / honest (mean)", "max", "honest total"):
            table.add_column(col, justify="left" if col == "mode" else "right")
        for mode, stats in report.items():
            table.add_row(
                mode,
                f"{stats['content_free_share']:.0%}",
                f"{stats.get('content_free_reward', 0.0):.0%}",
                f"{stats.get('content_free_max', 0.0):.0%}",
                f"{stats['honest_total']:.2f}",
            )
        console.print(table)
        console.print(
            "accepted = total > 0 (parsed); content-free = procedure 0 (no gold step in place net of wrong ones, or a "
            "wrong step followed); honest = reference resolution, gold ids, right flag, confidence "
            f"{HONEST_CONFIDENCE}."
        )
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=240, help="generated tickets")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    start = time.perf_counter()
    tickets = generate_tickets(args.n, args.seed)
    reward = CombinedReward(triage_rewards())
    honest_total, honest_parts = score(reward, [honest(t) for t in tickets], tickets)
    best = 5 + 1 - (1 - HONEST_CONFIDENCE) ** 2
    table = Table(
        title=f"Triage red team: {len(CASES)} cases on {args.n} tickets (seed {args.seed}); honest answer "
        f"{float(honest_total.mean()):.2f} of 6 (min {float(honest_total.min()):.2f})"
    )
    columns = ("case", "tickets", "total", "honest total", "min share", "max share", "loses on", "min gap", "holds")
    for col in columns:
        table.add_column(col, justify="left" if col in ("case", "loses on") else "right")
    paraphrase_total, _ = score(reward, [honest_paraphrase(t) for t in tickets], tickets)
    paraphrase_share = paraphrase_total / honest_total
    table.add_row(
        f"honest paraphrase (>= {PARAPHRASE_SHARE:.0%})",
        str(len(tickets)),
        f"{float(paraphrase_total.mean()):.2f}",
        f"{float(honest_total.mean()):.2f}",
        f"{float(paraphrase_share.min()):.0%}",
        f"{float(paraphrase_share.max()):.0%}",
        "-",
        "-",
        "yes" if float(paraphrase_share.min()) >= PARAPHRASE_SHARE else "NO",
        end_section=True,
    )
    failed = over_cap = over_cap_tickets = 0
    for case in CASES:
        index = [i for i, t in enumerate(tickets) if case.applies(t)]
        total, parts = score(reward, [case.answer(tickets[i]) for i in index], [tickets[i] for i in index])
        share = total / honest_total[index]
        gap = honest_parts[case.loses_on][index] - parts[case.loses_on]
        capped = not case.content_free or float(share.max()) <= CONTENT_FREE_SHARE
        holds = bool((share < 1).all()) and float(gap.min()) >= MARGIN and capped
        failed += not holds
        if case.content_free:
            over_cap += not capped
            over_cap_tickets += int((share > CONTENT_FREE_SHARE).sum())
        table.add_row(
            case.name + (" *" if case.content_free else ""),
            str(len(index)),
            f"{float(total.mean()):.2f}",
            f"{float(honest_total[index].mean()):.2f}",
            f"{float(share.min()):.0%}",
            f"{float(share.max()):.0%}",
            case.loses_on,
            f"{float(gap.min()):.2f}",
            "yes" if holds else "NO",
        )
    penalised = int((honest_total < best - 1e-4).sum())
    paraphrases_low = int((paraphrase_share < PARAPHRASE_SHARE).sum())
    console = Console(width=150)
    console.print(table)
    console.print(
        f"* content-free (no right resolution: word lists, reordered steps, ...): capped at {CONTENT_FREE_SHARE:.0%} "
        f"of the honest total on every ticket. {len(CASES) - failed}/{len(CASES)} cases hold.\n"
        f"Honest answers penalised: {penalised} of {len(tickets)} below {best:.2f} and {paraphrases_low} of "
        f"{len(tickets)} paraphrases below {PARAPHRASE_SHARE:.0%} of honest (target 0). Adversarial cases paid above "
        f"{CONTENT_FREE_SHARE:.0%}: {over_cap} cases, {over_cap_tickets} case-tickets (target 0). "
        f"{time.perf_counter() - start:.1f} s."
    )
    mode_report(tickets, console)


if __name__ == "__main__":
    main()
