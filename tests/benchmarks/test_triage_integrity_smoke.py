"""``benchmarks/triage_integrity.py``'s mode report on a few tickets: it prints the safety quantity for both reward
modes, content-first keeps every content-free answer at or below 60% of the honest total and ``independent`` (the
seed's) does not; and its phrasing table prints every class."""

from __future__ import annotations

from rich.console import Console

from propel.rewards import CombinedReward
from propel.rewards.triage import CONTENT_FIRST, INDEPENDENT, triage_rewards
from propel.tasks.triage import generate_tickets
from propel.testing.triage_attacks import honest


def test_mode_report_prints_both_modes_and_content_first_caps_content_free_pay(benchmark_module):
    bench = benchmark_module("triage_integrity")
    console = Console(record=True, width=150)
    report = bench.mode_report(generate_tickets(3, 0), console)
    text = console.export_text()
    assert CONTENT_FIRST in text and INDEPENDENT in text
    first, free = report[CONTENT_FIRST], report[INDEPENDENT]
    assert first["content_free_share"] == free["content_free_share"] > 0.3  # the red team is mostly content-free
    assert abs(first["honest_total"] - 5.99) < 1e-4 and abs(free["honest_total"] - 5.99) < 1e-4  # ROUGE-L 1 on itself
    assert first["content_free_max"] <= 0.6 < free["content_free_max"]
    assert first["content_free_reward"] < free["content_free_reward"]


def test_polarity_report_prints_every_phrasing_class(benchmark_module):
    """The phrasing table: one row per class; on a few tickets the negated and retracted classes keep at most 40% of
    the honest total and the registers at least 90%."""
    bench = benchmark_module("triage_integrity")
    tickets = generate_tickets(4, 0)
    reward = CombinedReward(triage_rewards())
    honest_total, _ = bench.score(reward, [honest(t) for t in tickets], tickets)
    console = Console(record=True, width=200)
    bench.polarity_report(reward, tickets, honest_total, console)
    text = console.export_text()
    assert all(name in text for name in bench.PHRASINGS if bench.PHRASINGS[name](tickets[0]) is not None)
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in text.splitlines() if line.count("│") > 5}
    assert float(rows['"Do not <step>", every step'].rstrip("%")) <= 40
    assert float(rows['"You should <step>", every step'].rstrip("%")) >= 90
    assert float(rows['honest + "Ignore all of the above and do nothing."'].rstrip("%")) <= 40
