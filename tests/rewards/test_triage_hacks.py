"""Reward hacks that beat the original triage rewards, as regressions: under the default weights each one scores below
an honest answer, and property tests (hypothesis) show parsimony, and the whole reward, never pay more for longer
off-topic text."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from propel.records import Sample
from propel.rewards import CombinedReward
from propel.rewards.triage import Parsimony, parsimony, triage_rewards
from propel.tasks.triage import generate_tickets, ticket_context

TICKETS = generate_tickets(240, seed=0)
# two tickets per category, one with and one without escalation where the category has both
CASES = [TICKETS[i] for i in (0, 1, 2, 3, 4, 5, 6, 7, 17, 23)]
OFF_TOPIC = [
    "jedi",
    "sith",
    "wookiee",
    "lightsaber",
    "tatooine",
    "skywalker",
    "lucas",
    "droid",
    "cantina",
    "hyperspace",
    "rebel",
    "yoda",
]
STAR_WARS = (
    "Star Wars: A New Hope was written and directed by George Lucas and released by 20th Century Fox in 1977. "
    "Its production in Tunisia and at Elstree Studios ran over budget, and Lucas negotiated the merchandising "
    "rights with the studio instead of a larger fee. The film's visual effects were made by the newly founded "
    "Industrial Light and Magic, and John Williams wrote the score, which the London Symphony Orchestra recorded. "
) * 2
REWARD = CombinedReward(triage_rewards())


def submit(resolution, citations, confidence, escalate) -> str:
    body = {"resolution": resolution, "citations": citations, "confidence": confidence, "escalate": escalate}
    return "submit_resolution " + json.dumps(body)


def honest(ticket, confidence=0.8, extra: str = "") -> str:
    """A good answer: most of the gold fix in its own words order, the gold citations once, the right escalation."""
    words = ticket.gold_resolution.split()
    resolution = " ".join(words[: max(8, int(len(words) * 0.75))]) + extra
    return submit(resolution, list(ticket.gold_ids), confidence, ticket.escalate)


def totals(ticket, *completions: str) -> list[float]:
    ctx = ticket_context(ticket)
    out = REWARD([Sample(prompt="", completion=c, context=ctx) for c in completions])
    return out.total.tolist()


def wrong_fix(ticket) -> str:
    """The gold resolution of an unrelated issue (a confident answer to the wrong problem)."""
    return next(t.gold_resolution for t in TICKETS if t.category != ticket.category)


@pytest.mark.parametrize("ticket", CASES, ids=lambda t: t.ticket_id)
def test_every_named_hack_scores_below_an_honest_answer(ticket):
    gold = list(ticket.gold_ids)
    hacks = {
        "star_wars_filler": submit(STAR_WARS, gold, 0.9, ticket.escalate),
        "star_wars_then_empty_json": STAR_WARS + submit("", [], 0.9, ticket.escalate),
        "empty_resolution_valid_json": submit("", gold, 0.9, ticket.escalate),
        "empty_resolution_zero_confidence": submit("", gold, 0.0, ticket.escalate),
        "thirty_copies_of_one_citation": honest(ticket).replace(json.dumps(gold), json.dumps([gold[0]] * 30)),
        "invented_citation_ids": honest(ticket).replace(json.dumps(gold), json.dumps(["KB-NET-777", "KB-SEC-999"])),
        "invented_ids_next_to_gold": honest(ticket).replace(json.dumps(gold), json.dumps([*gold, "KB-X-1", "KB-X-2"])),
        "confident_wrong": submit(wrong_fix(ticket), gold, 0.95, ticket.escalate),
        "hedged_wrong": submit(wrong_fix(ticket), gold, 0.1, ticket.escalate),
        "ticket_pasted_back": submit(ticket.text, gold, 0.9, ticket.escalate),
    }
    assert (
        "KB-NET-777" in hacks["invented_citation_ids"] and hacks["thirty_copies_of_one_citation"].count(gold[0]) == 30
    )
    scores = dict(zip(["honest", *hacks], totals(ticket, honest(ticket), *hacks.values()), strict=True))
    for name in hacks:
        assert scores[name] < scores["honest"], (name, scores)
    assert scores["confident_wrong"] < scores["hedged_wrong"]


def test_the_seeds_u_shaped_parsimony_would_fail_here():
    """The original U-shaped parsimony bug: paid under 200 and over 400 characters. Ours is flat then falling, never
    rising again."""
    budget = 40
    values = [parsimony(n, budget, 1.0) for n in range(0, 400)]
    assert all(a >= b for a, b in zip(values, values[1:], strict=False))
    assert values[0] == 1.0 and values[-1] == 0.0


@settings(max_examples=200, deadline=None)
@given(
    ticket_words=st.integers(1, 300),
    length=st.integers(0, 2000),
    extra=st.integers(1, 2000),
    ratio=st.floats(0.1, 5.0),
    min_words=st.integers(1, 200),
    tail=st.floats(0.05, 5.0),
)
def test_parsimony_is_bounded_and_never_pays_more_for_longer(ticket_words, length, extra, ratio, min_words, tail):
    reward = Parsimony(ratio=ratio, min_words=min_words, tail=tail)
    budget = reward.budget(" ".join(["w"] * ticket_words))
    short, long = parsimony(length, budget, tail), parsimony(length + extra, budget, tail)
    assert 0.0 <= long <= short <= 1.0


@settings(max_examples=40, deadline=None)
@given(
    index=st.integers(0, len(TICKETS) - 1),
    filler=st.lists(st.sampled_from(OFF_TOPIC), min_size=1, max_size=150),
    before=st.booleans(),
    confidence=st.floats(0.5, 1.0),
)
def test_longer_off_topic_answers_never_score_more(index, filler, before, confidence):
    """Off-topic words added to an honest answer (inside the resolution, or before the JSON) never raise parsimony,
    nor the combined reward (with a confidence >= 0.5 a drop in correctness can only cost calibration)."""
    ticket = TICKETS[index]
    base = honest(ticket, confidence)
    text = " ".join(filler)
    padded = (text + "\n" + base) if before else honest(ticket, confidence, extra=" " + text)
    ctx = ticket_context(ticket)
    samples = [Sample(prompt="", completion=c, context=ctx) for c in (base, padded)]
    out = REWARD(samples)
    assert out.components["parsimony"][1] <= out.components["parsimony"][0]
    assert out.total[1] <= out.total[0] + 1e-6


@settings(max_examples=100, deadline=None)
@given(
    text=st.text(max_size=400)
    | st.builds(
        lambda d: json.dumps(d),
        st.dictionaries(
            st.sampled_from(["resolution", "citations", "confidence", "escalate", "name", "arguments"]),
            st.none()
            | st.booleans()
            | st.floats(allow_nan=True)
            | st.text(max_size=30)
            | st.lists(st.text(max_size=12)),
        ),
    )
)
def test_every_component_stays_in_its_range_on_any_text(text):
    ticket = TICKETS[0]
    out = REWARD([Sample(prompt="", completion=text, context=ticket_context(ticket))])
    for name, value in out.components.items():
        assert 0.0 <= float(value[0]) <= 1.0, (name, text)
