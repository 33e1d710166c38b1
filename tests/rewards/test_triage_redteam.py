"""The triage red-team corpus (``propel.testing.triage_attacks``) and the content-gating checks, on all 240 generated
tickets under the six default components at weight 1: every case loses on its named component, no answer without a right
resolution reaches 60% of the honest total, the honest answer keeps today's best score, and the total is monotone in
content."""

from __future__ import annotations

import functools
import itertools
import json
import re

import pytest
import torch

from propel.records import Sample
from propel.rewards import CombinedReward
from propel.rewards.triage import RepetitionPenalty, check_steps, triage_rewards, word_count
from propel.tasks.triage import generate_tickets, ticket_context
from propel.tasks.triage.bank import ISSUES
from propel.testing.triage_attacks import CASES, CONTENT_FREE_SHARE, HONEST_CONFIDENCE, ZWSP, honest, submit

TICKETS = generate_tickets(240, seed=0)
COMPONENTS = ("format", "resolution", "grounding", "calibration", "parsimony", "repetition")
REWARD = CombinedReward(triage_rewards())
MARGIN = 0.2
"""How far below the honest answer a case must score on its named component, on every ticket."""
TODAY_HONEST_MEAN = 5.47
"""The measured mean of today's honest grounded answer (before content gating)."""
_CLAUSES = re.compile(r",\s+(?:and\s+|then\s+)?|\s+and\s+|;\s+")


def score(completions: list[str], tickets) -> tuple[torch.Tensor, dict[str, torch.Tensor], list[Sample]]:
    samples = [
        Sample(prompt="", completion=c, context=ticket_context(t)) for c, t in zip(completions, tickets, strict=True)
    ]
    out = REWARD(samples)
    return out.total, out.components, samples


@functools.lru_cache(maxsize=1)
def honest_scores() -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    total, parts, _ = score([honest(t) for t in TICKETS], TICKETS)
    return total, parts


def test_the_corpus_names_each_trick_once_and_a_component_to_lose_on():
    names = [c.name for c in CASES]
    assert len(CASES) >= 25 and len(set(names)) == len(names)
    assert {c.loses_on for c in CASES} == set(COMPONENTS)
    tricks = ("paste", "stuffing", "invented", "farming", "half_confidence", "escalate_everything", "empty")
    tricks += ("invisible", "zwsp", "wrong_runbook", "prompt_echo", "x_with_gold_ids", "duplicate_keys")
    for trick in tricks:
        assert any(trick in n for n in names), trick


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_every_case_loses_on_its_component_on_every_ticket(case):
    tickets = [t for t in TICKETS if case.applies(t)]
    index = [i for i, t in enumerate(TICKETS) if case.applies(t)]
    assert len(tickets) >= 50
    honest_total, honest_parts = honest_scores()
    total, parts, _ = score([case.answer(t) for t in tickets], tickets)
    gap = honest_parts[case.loses_on][index] - parts[case.loses_on]
    assert (total < honest_total[index]).all(), case.name
    assert float(gap.min()) >= MARGIN, (case.name, float(gap.min()))
    if case.content_free:
        share = total / honest_total[index]
        assert float(share.max()) <= CONTENT_FREE_SHARE, (case.name, float(share.max()))


def test_no_content_free_answer_reaches_60_percent_of_the_honest_total_on_any_ticket():
    """The first check: "x", the ticket echoed back, an unrelated paragraph and a distractor article's steps,
    each with the gold ids cited or not, at the best confidence for a wrong answer (0) and the right flag."""
    honest_total, _ = honest_scores()
    free = [c for c in CASES if c.content_free]
    assert {"x_with_gold_ids", "x_without_ids", "ticket_echo_with_gold_ids", "ticket_echo_without_ids"} <= {
        c.name for c in free
    }
    assert {"unrelated_with_gold_ids", "unrelated_without_ids", "wrong_runbook_with_gold_ids"} <= {c.name for c in free}
    worst = 0.0
    for case in free:
        total, _, _ = score([case.answer(t) for t in TICKETS], TICKETS)
        worst = max(worst, float((total / honest_total).max()))
    assert worst <= CONTENT_FREE_SHARE
    # the headline hack ("x", gold ids cited) scored 5.0 of 6: now parse credit, grounding and calibration only
    total, parts, _ = score([submit("x", list(t.gold_ids), 0.0, t.escalate) for t in TICKETS], TICKETS)
    assert torch.allclose(total, torch.full_like(total, 2.2), atol=1e-5) and float(parts["resolution"].max()) == 0.0


def test_unparseable_answers_zwsp_words_and_junked_copies():
    """The second check, on every ticket: an unparseable answer is 0 on all six components (reason logged),
    ZWSP-joined text counts its real words, a pasted gold article with junk inserted is still a copy."""
    _, parts, samples = score([t.gold_resolution for t in TICKETS], TICKETS)
    assert all(float(parts[n].abs().max()) == 0.0 for n in COMPONENTS)
    assert {s.info["triage"]["reason"] for s in samples} == {"no_submission"}
    for t in TICKETS[:24]:
        assert word_count(t.gold_resolution.replace(" ", ZWSP)) == len(t.gold_resolution.split())
    repetition = RepetitionPenalty()
    for t in TICKETS:
        runbook = next(a for a in t.articles if a.id == t.gold_ids[0])
        pasted = f"{runbook.title}\n{runbook.body}".split(" ")
        junked = " ".join(w + (f" qz{i}" if i % 15 == 14 else "") for i, w in enumerate(pasted))
        # the junk changes nothing, and the paste is a copy (changed with the clause-wise copy measure, which does not
        # count the step numbers: was ">= 30 copied words"; the UPS runbook has 29 words without them)
        clean = repetition.copied(honest(t).replace(t.gold_resolution, " ".join(pasted)), t.grading_data())
        copied = repetition.copied(honest(t).replace(t.gold_resolution, junked), t.grading_data())
        assert copied == clean >= repetition.copy_span * (1 + MARGIN)


def test_the_honest_answer_keeps_todays_best_score_on_every_ticket():
    """The third check, first half. Today's honest answer scored at most 5 + (1 - (1 - c)^2) at confidence c
    (every other component is bounded by 1; its measured mean was 5.47); the honest answer covering all gold
    steps now reaches that bound on every one of the 240 tickets."""
    honest_total, parts = honest_scores()
    bound = 5 + 1 - (1 - HONEST_CONFIDENCE) ** 2
    assert torch.allclose(honest_total, torch.full_like(honest_total, bound), atol=1e-5)  # float32 sums
    assert float(honest_total.min()) >= TODAY_HONEST_MEAN
    assert float(parts["resolution"].min()) == 1.0


def _half(ticket) -> str:
    """The fewest clauses of the reference resolution that cover exactly half the gold steps and no wrong step."""
    data = ticket.grading_data()
    clauses = _CLAUSES.split(ticket.gold_resolution.rstrip("."))
    for k in range(1, len(clauses) + 1):
        for subset in itertools.combinations(clauses, k):
            check = check_steps(
                ", ".join(subset),
                ticket.escalate,
                tuple(data["gold_steps"]),
                tuple(data["distractor_steps"]),
                ticket.escalate,
                data["ticket"],
            )
            if check.coverage == 0.5 and not check.wrong:
                return ", ".join(subset) + "."
    raise AssertionError(f"no half of {ticket.ticket_id}'s reference")


def test_the_total_is_monotone_in_content_whatever_the_confidence():
    """The third check, second half: half the gold steps scores strictly between a content-free answer and
    the full fix, on every ticket, for any confidence each of them states (content outweighs the confidence game)."""
    confidences = (0.0, 0.5, 0.9, 1.0)

    def totals(resolution_of) -> torch.Tensor:
        rows = []
        for c in confidences:
            texts = [submit(resolution_of(t), list(t.gold_ids), c, t.escalate) for t in TICKETS]
            rows.append(score(texts, TICKETS)[0])
        return torch.stack(rows)

    free, half, full = totals(lambda t: "x"), totals(_half), totals(lambda t: t.gold_resolution)
    assert (free.max(0).values < half.min(0).values).all()
    assert (half.max(0).values < full.min(0).values).all()


def test_every_reference_is_a_right_fix_for_its_runbook_and_no_other():
    """The bank's reference resolutions against every other runbook as the distractor (552 pairings, more than the
    240 tickets draw): each covers its own runbook fully and scores 0 as the answer to another."""
    for a, b in itertools.permutations(ISSUES, 2):
        own = a.resolution.format(host="web-07", site="Dallas", user="a.khan", when="today")
        other = b.resolution.format(host="web-07", site="Dallas", user="a.khan", when="today")
        assert check_steps(own, a.escalate, a.steps, b.steps, a.escalate).content == 1.0, (a.key, b.key)
        assert check_steps(other, a.escalate, a.steps, b.steps, a.escalate).content == 0.0, (a.key, b.key)


def test_submit_builds_the_answer_format_the_prompt_asks_for():
    text = submit("Fix it.", ["KB-NET-001"], 0.5, False)
    assert text.startswith("submit_resolution ") and json.loads(text.split(" ", 1)[1])["confidence"] == 0.5
