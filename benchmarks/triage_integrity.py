"""Triage reward integrity: every red-team case against the honest answer, on the generated tickets.

For each case of ``propel.testing.triage_attacks.CASES`` (six default components at weight 1, maximum 6): its mean
total, the honest answer's mean total on the same tickets, the smallest and the largest share of the honest total it
reaches on any ticket, the component it must lose on with the smallest gap to the honest answer on that component over
the tickets, and whether it holds (below honest on every ticket, the named gap >= 0.2, and a content-free case at or
below 60% of honest everywhere: the checks ``tests/rewards/test_triage_redteam.py`` asserts). The first row is the
honest answer in an engineer's own words (``redteam.honest_paraphrase``), which holds at >= 95% of the honest total on
every ticket, and the second the honest answer in other registers ("you should ...", "we will ...":
``honest_registers``), which holds at >= 90% (its framing words cost parsimony, not content). The footer counts honest
answers penalised (the honest answer below the best total at its confidence, a paraphrase below 95% of it or the other
registers below 90%) and adversarial cases paid above 60% (content-free cases above the cap on some ticket); both
targets are 0. Reorderings of the steps are tried at confidence 0.9 and at 0, the best confidence for an answer that is
not a right fix (every other component ignores the confidence's value), one of them with the wrong flag too;
``tests/rewards/test_triage_procedure.py`` sweeps every reordering over confidences 0 to 1 and both flags.

A second table (``polarity_report``) reads the honest answer's steps rephrased by class (``PHRASINGS``: negated, a
runbook "do not" step done, in other registers, a generic or vague verb in front of each step's words, retracted) and
gives each class's share of the honest total and its content. A third table (``mode_report``) gives the safety quantity
of both reward modes (``propel.rewards.triage.mode``) on one batch, every answer above (the honest answer, its
paraphrase and every case on every ticket it applies to): the share of accepted answers with no content (procedure 0)
and their total relative to the honest answer on the same tickets (``propel.rewards.triage.integrity``). Content-first
caps it; ``independent``, the seed's six independent components, does not.

    python benchmarks/triage_integrity.py              # 240 tickets, seed 0
    python benchmarks/triage_integrity.py --n 480 --seed 1
"""

from __future__ import annotations

import argparse
import re
import time
from collections.abc import Callable
from typing import Any

import torch
from rich.console import Console
from rich.table import Table

from propel.records import Sample
from propel.rewards import CombinedReward
from propel.rewards.triage import MODES, integrity, triage_rewards
from propel.tasks.triage import generate_tickets, ticket_context
from propel.testing.triage_attacks import (
    CASES,
    CONTENT_FREE_SHARE,
    HONEST_CONFIDENCE,
    STOP_WORDS,
    honest,
    honest_paraphrase,
    honest_registers,
    reference_steps,
    sentences,
    submit,
)
from propel.testing.triage_phrasings import NEGATIONS, REGISTERS, RETRACTIONS, framed, negated

MARGIN = 0.2
PARAPHRASE_SHARE = 0.95
"""The least an honest paraphrase must score, as a share of the honest answer's total, on every ticket."""
REGISTER_SHARE = 0.9
"""The least the honest answer in other registers ("you should ...", "we will ...") must score, as a share of the
honest answer's total, on every ticket (its longer framing costs parsimony; its content is the same)."""


def score(reward: CombinedReward, completions: list[str], tickets) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    samples = [
        Sample(prompt="", completion=c, context=ticket_context(t)) for c, t in zip(completions, tickets, strict=True)
    ]
    out = reward(samples)
    return out.total, out.components


def batch(tickets) -> list[Sample]:
    """The honest answer, its paraphrase and its other registers on every ticket, and every red-team case on every
    ticket it applies to."""
    answers = [(honest(t), t) for t in tickets] + [(honest_paraphrase(t), t) for t in tickets]
    answers += [(honest_registers(t), t) for t in tickets]
    answers += [(case.answer(t), t) for case in CASES for t in tickets if case.applies(t)]
    return [Sample(prompt="", completion=c, context=ticket_context(t)) for c, t in answers]


def _runbook(ticket) -> tuple[str, ...]:
    return next(a for a in ticket.articles if a.id == ticket.gold_ids[0]).steps


def _words(step: str) -> str:
    return " ".join(w for w in re.findall(r"[a-z0-9]+", step.lower()) if w not in STOP_WORDS)


def _cycling(templates: tuple[str, ...], frame: Callable[[str, str], str]) -> Callable[[Any], str]:
    def build(ticket) -> str:
        start = int(ticket.ticket_id[1:])
        return sentences(
            [frame(templates[(start + k) % len(templates)], u) for k, u in enumerate(reference_steps(ticket))]
        )

    return build


def _forbidden_done(ticket) -> str | None:
    """The runbook's steps with "Do not" dropped, on a ticket whose runbook says not to do something."""
    steps = _runbook(ticket)
    if not any(s.startswith("Do not ") for s in steps):
        return None
    return " ".join(re.sub(r"^Do not (\w)", lambda m: m.group(1).upper(), s) for s in steps)


PHRASINGS: dict[str, Callable[[Any], str | None]] = {
    '"Do not <step>", every step': lambda t: sentences([framed("Do not {}", u) for u in reference_steps(t)]),
    '"Never <step>", every step': lambda t: sentences([framed("Never {}", u) for u in reference_steps(t)]),
    f"every step negated ({len(NEGATIONS)} negators, cycling)": _cycling(NEGATIONS, negated),
    'the runbook\'s "do not" done ("Reboot the server.")': _forbidden_done,
    '"You should <step>", every step': lambda t: sentences([framed("You should {}", u) for u in reference_steps(t)]),
    '"We need to <step>", every step': lambda t: sentences([framed("We need to {}", u) for u in reference_steps(t)]),
    f"every step in a register ({len(REGISTERS)}, cycling)": _cycling(REGISTERS, framed),
    '"Check the <step\'s words>", every step': lambda t: sentences([f"Check the {_words(s)}" for s in _runbook(t)]),
    '"Handle the <step\'s words>", every step': lambda t: sentences([f"Handle the {_words(s)}" for s in _runbook(t)]),
    'honest + "Ignore all of the above and do nothing."': lambda t: (
        t.gold_resolution + " Ignore all of the above and do nothing."
    ),
    f"honest + a retraction ({len(RETRACTIONS)}, cycling)": lambda t: (
        t.gold_resolution + " " + RETRACTIONS[int(t.ticket_id[1:]) % len(RETRACTIONS)]
    ),
}
"""Classes of phrasing of the honest answer's steps (``propel.testing.triage_phrasings``): negated, a "do not" step
done, other registers, a generic or vague verb in front of each step's words, retracted."""


def polarity_report(reward: CombinedReward, tickets, honest_total: torch.Tensor, console: Console) -> None:
    """Per class of ``PHRASINGS``: the mean and largest share of the honest total, the mean resolution content and
    the tickets where it scores at least the honest answer (gold ids, right flag, confidence 0.9 for both)."""
    table = Table(
        title=f"Polarity, register and retraction: the honest answer's steps rephrased, {len(tickets)} tickets"
    )
    for col in ("phrasing", "tickets", "share of honest (mean)", "max", "content (mean)", ">= honest"):
        table.add_column(col, justify="left" if col == "phrasing" else "right")
    for name, build in PHRASINGS.items():
        found = [(i, build(t)) for i, t in enumerate(tickets)]
        found = [(i, r) for i, r in found if r is not None]
        index = [i for i, _ in found]
        answers = [submit(r, list(tickets[i].gold_ids), HONEST_CONFIDENCE, tickets[i].escalate) for i, r in found]
        total, parts = score(reward, answers, [tickets[i] for i in index])
        share = total / honest_total[index]
        table.add_row(
            name,
            str(len(index)),
            f"{float(share.mean()):.1%}",
            f"{float(share.max()):.1%}",
            f"{float(parts['resolution'].mean()):.3f}",
            str(int((total >= honest_total[index] - 1e-6).sum())),
        )
    console.print(table)


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
    paraphrases_low = 0
    for name, variant, least in (
        ("honest paraphrase", honest_paraphrase, PARAPHRASE_SHARE),
        ("honest, other registers", honest_registers, REGISTER_SHARE),
    ):
        variant_total, _ = score(reward, [variant(t) for t in tickets], tickets)
        variant_share = variant_total / honest_total
        paraphrases_low += int((variant_share < least).sum())
        table.add_row(
            f"{name} (>= {least:.0%})",
            str(len(tickets)),
            f"{float(variant_total.mean()):.2f}",
            f"{float(honest_total.mean()):.2f}",
            f"{float(variant_share.min()):.0%}",
            f"{float(variant_share.max()):.0%}",
            "-",
            "-",
            "yes" if float(variant_share.min()) >= least else "NO",
            end_section=name != "honest paraphrase",
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
    console = Console(width=150)
    console.print(table)
    console.print(
        f"* content-free (no right resolution: word lists, reordered steps, ...): capped at {CONTENT_FREE_SHARE:.0%} "
        f"of the honest total on every ticket. {len(CASES) - failed}/{len(CASES)} cases hold.\n"
        f"Honest answers penalised: {penalised} of {len(tickets)} below {best:.2f} and {paraphrases_low} of "
        f"{2 * len(tickets)} paraphrases and other registers below their share of honest (target 0). Adversarial "
        "cases paid above "
        f"{CONTENT_FREE_SHARE:.0%}: {over_cap} cases, {over_cap_tickets} case-tickets (target 0). "
        f"{time.perf_counter() - start:.1f} s."
    )
    polarity_report(reward, tickets, honest_total, console)
    mode_report(tickets, console)


if __name__ == "__main__":
    main()
