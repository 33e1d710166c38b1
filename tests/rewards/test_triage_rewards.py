"""The six triage reward components on hand-computed cases: each value below is worked out in the comment next to
it from the component's docstring formula."""

from __future__ import annotations

import json

import pytest
import torch

from propel.domains.base import Context
from propel.engines.base import Prompt
from propel.errors import ConfigError
from propel.rewards import CombinedReward
from propel.rewards.triage import (
    CitationGrounding,
    Parsimony,
    RepetitionPenalty,
    TriageCalibration,
    TriageFormat,
    TriageResolution,
    longest_copy,
    loop_fraction,
    parsimony,
    rouge_l,
    triage_rewards,
)
from propel.rollouts.record import Sample

GOLD = {
    "ticket_id": "T1",
    "category": "networking",
    "ticket": "DNS broken\nUsers cannot resolve intranet names since this morning",  # 10 words
    "article_ids": ["KB-NET-002", "KB-NET-005", "KB-CLD-001"],
    "articles_text": "Internal DNS names do not resolve\n1. Run nslookup against both internal resolvers.",
    "gold_ids": ["KB-NET-002"],
    "gold_resolution": "restart the dns resolver service",
    "escalate": False,
}


def sample(completion: str, gold: dict | None = None) -> Sample:
    ctx = Context(id="T1", prompt=Prompt(text="ticket"), data=dict(gold or GOLD))
    return Sample(prompt="ticket", completion=completion, context=ctx)


def answer(resolution="restart the dns server", citations=("KB-NET-002",), confidence=0.8, escalate=False) -> str:
    body = {"resolution": resolution, "citations": list(citations), "confidence": confidence, "escalate": escalate}
    return "submit_resolution " + json.dumps(body)


def one(reward, completion: str, gold: dict | None = None) -> float:
    return float(reward([sample(completion, gold)])[0])


# ------------------------------------------------------------------------------------------------------ format
def test_format_is_graduated_per_valid_field():
    fmt = TriageFormat()
    assert one(fmt, answer()) == pytest.approx(1.0)  # 0.2 object + 4 x 0.2
    assert one(fmt, answer(resolution="")) == pytest.approx(0.8)  # empty resolution: no credit
    assert one(fmt, answer(resolution=" ... ")) == pytest.approx(0.8)  # punctuation only: no credit
    assert one(fmt, answer(citations=())) == pytest.approx(0.8)  # empty list: no credit
    assert one(fmt, answer(confidence="0.9")) == pytest.approx(0.8)  # a string is not a number
    assert one(fmt, answer(confidence=1.5)) == pytest.approx(0.8)  # out of [0, 1]
    assert one(fmt, answer(escalate="no")) == pytest.approx(0.8)
    assert one(fmt, answer(resolution="", citations=(), confidence=None, escalate=None)) == pytest.approx(0.2)
    assert one(fmt, "I think you should restart the DNS server.") == 0.0  # no JSON at all
    assert one(fmt, answer() + "\n" + answer()) == pytest.approx(0.8)  # two submissions: no object credit
    tool_call = json.dumps(
        {"name": "submit_resolution", "arguments": json.loads(answer()[len("submit_resolution ") :])}
    )
    assert one(fmt, f"```json\n{tool_call}\n```") == pytest.approx(1.0)
    with pytest.raises(ConfigError):
        TriageFormat(object_credit=1.5)


# -------------------------------------------------------------------------------------------------- resolution
def test_resolution_is_rouge_l_against_the_gold():
    # LCS("restart the dns server", "restart the dns resolver service") = 3: P = 3/4, R = 3/5, F = 2/3
    assert rouge_l("restart the dns server", "restart the dns resolver service") == pytest.approx(2 / 3)
    res = TriageResolution()
    assert one(res, answer()) == pytest.approx(2 / 3)
    assert one(res, answer(resolution="restart the dns resolver service")) == pytest.approx(1.0)
    assert one(res, answer(resolution="")) == 0.0
    assert one(res, "restart the dns resolver service") == 0.0  # no submission: nothing graded


# --------------------------------------------------------------------------------------------------- grounding
def test_grounding_is_f1_with_invented_ids_wrong_and_duplicates_once():
    g = CitationGrounding()
    assert one(g, answer(citations=["KB-NET-002"])) == pytest.approx(1.0)
    assert one(g, answer(citations=["kb-net-002 "])) == pytest.approx(1.0)  # case and spaces ignored
    # a distractor next to the gold: P = 1/2, R = 1 -> F1 = 2/3
    assert one(g, answer(citations=["KB-NET-002", "KB-NET-005"])) == pytest.approx(2 / 3)
    # an invented id counts as a wrong citation: P = 1/3, R = 1 -> F1 = 1/2
    assert one(g, answer(citations=["KB-NET-002", "KB-XYZ-123", "KB-NET-999"])) == pytest.approx(0.5)
    assert one(g, answer(citations=["KB-XYZ-123"])) == 0.0
    assert one(g, answer(citations=["KB-NET-002"] * 30)) == pytest.approx(1.0)  # counted once: no more than one
    assert one(g, answer(citations=[])) == 0.0
    two_gold = {**GOLD, "gold_ids": ["KB-NET-002", "KB-CLD-001"]}
    assert one(g, answer(citations=["KB-NET-002"]), two_gold) == pytest.approx(2 / 3)  # P = 1, R = 1/2
    no_gold = {**GOLD, "gold_ids": []}
    assert one(g, answer(citations=[]), no_gold) == 1.0 and one(g, answer(), no_gold) == 0.0
    s = sample(answer(citations=["KB-NET-002", "KB-FAKE-1"]))
    g([s])
    assert s.info["triage"]["invalid_citations"] == ["KB-FAKE-1"]


# ------------------------------------------------------------------------------------------------- calibration
def test_calibration_is_one_minus_brier():
    c = TriageCalibration(threshold=0.3)
    right = "restart the dns resolver service"
    assert one(c, answer(resolution=right, confidence=0.8)) == pytest.approx(1 - 0.2**2)  # correct, 0.8
    assert one(c, answer(resolution=right, confidence=1.0)) == pytest.approx(1.0)
    assert one(c, answer(resolution="reboot the printer", confidence=0.95)) == pytest.approx(1 - 0.95**2)
    assert one(c, answer(resolution="reboot the printer", confidence=0.1)) == pytest.approx(1 - 0.1**2)
    # right fix but the wrong escalation call: not correct
    assert one(c, answer(resolution=right, confidence=0.9, escalate=True)) == pytest.approx(1 - 0.9**2)
    assert one(c, answer(resolution=right, confidence="high")) == 0.0  # no valid confidence: worst outcome
    s = sample(answer(resolution=right))
    c([s])
    assert s.info["triage"]["correct"] is True
    with pytest.raises(ConfigError):
        TriageCalibration(threshold=0.0)


# --------------------------------------------------------------------------------------------------- parsimony
def test_parsimony_is_one_within_the_budget_then_linear_to_zero():
    assert parsimony(30, 40, 1.0) == 1.0 and parsimony(40, 40, 1.0) == 1.0
    assert parsimony(60, 40, 1.0) == pytest.approx(0.5)  # 20 words over a 40-word budget, tail 40
    assert parsimony(80, 40, 1.0) == 0.0 and parsimony(10_000, 40, 1.0) == 0.0
    p = Parsimony(ratio=2.0, min_words=10)
    assert p.budget(GOLD["ticket"]) == 20.0  # 2 x 10 ticket words
    assert one(p, " ".join(["word"] * 20)) == 1.0
    assert one(p, " ".join(["word"] * 30)) == pytest.approx(0.5)  # 10 over a budget of 20
    assert Parsimony(ratio=2.0, min_words=50).budget(GOLD["ticket"]) == 50.0  # the floor for short tickets
    with pytest.raises(ConfigError):
        Parsimony(tail=0)


# -------------------------------------------------------------------------------------------------- repetition
def test_repetition_helpers():
    assert loop_fraction(["a", "b", "c", "d", "e", "f"], 4) == 0.0
    looped = ["a", "b", "c", "d"] * 3
    assert loop_fraction(looped, 4) == pytest.approx(5 / 9)  # 9 4-grams, 4 distinct
    source = ["one", "two", "three", "four", "five", "six", "seven"]
    assert longest_copy(["x", "two", "three", "four", "five", "y"], source, 3) == 4
    assert longest_copy(["x", "two", "three", "y"], source, 3) == 0  # shorter than the minimum span


def test_repetition_penalty_parts():
    r = RepetitionPenalty(n=4, loop_tolerance=0.1, copy_span=3)
    assert one(r, answer()) == 1.0
    # 30 copies of one id: duplicates = 29/30 (the id's own words also loop)
    assert one(r, answer(citations=["KB-NET-002"] * 30)) == pytest.approx(1 / 30)
    # the ticket pasted back: 8 copied words past a free span of 3 -> copy = clip((8 - 3) / 3) = 1
    assert one(r, answer(resolution="users cannot resolve intranet names since this morning")) == 0.0
    # 4 copied words: copy = (4 - 3) / 3
    assert one(r, answer(resolution="users cannot resolve intranet, so fix it")) == pytest.approx(1 - 1 / 3)
    # a loop: 30 words of period 3 -> 27 4-grams, 3 distinct: share 8/9, loop = (8/9 - 0.1) / 0.9 = 71/81
    assert one(r, "restart it now " * 10) == pytest.approx(10 / 81)


# -------------------------------------------------------------------------------------------------- combined
def test_defaults_combine_six_named_components():
    reward = CombinedReward(triage_rewards())
    out = reward([sample(answer(resolution="restart the dns resolver service", confidence=1.0))])
    assert list(out.components) == ["format", "resolution", "grounding", "calibration", "parsimony", "repetition"]
    assert float(out.total[0]) == pytest.approx(6.0)
    stats = out.stats("reward")
    assert all(f"reward/{n}/mean" in stats for n in out.components)


def test_a_context_without_gold_data_is_a_clear_error():
    s = Sample(prompt="p", completion=answer(), context=Context(id="x", prompt=Prompt(text="p")))
    with pytest.raises(ValueError, match="gold"):
        TriageFormat()([s])
    assert isinstance(TriageFormat()([sample(answer())]), torch.Tensor)
