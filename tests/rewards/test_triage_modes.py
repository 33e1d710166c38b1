"""The triage rewards' two modes and what they log beside what they pay: ``content_first`` (style gated by content,
the default) and ``independent`` (the seed's six independent components); the ungated style values
(``<name>_raw``), ROUGE-L, step content and coverage, the grounding split (invented-id rate, gold-citation F1), the
calibration's AUROC beside 1 - Brier, and the safety quantity (content-free answers' share and pay, per mode)."""

from __future__ import annotations

import json

import pytest
import torch
from rouge_score import rouge_scorer
from sklearn.metrics import roc_auc_score

from propel.callbacks.triage_integrity import TriageIntegrity
from propel.errors import ConfigError
from propel.lit_modules.state import RolloutState
from propel.records import Context, Prompt, Sample
from propel.rewards import CombinedReward
from propel.rewards.triage import (
    CONTENT_FIRST,
    INDEPENDENT,
    CitationGrounding,
    Parsimony,
    RepetitionPenalty,
    TriageCalibration,
    TriageFormat,
    TriageResolution,
    content_free,
    honest_answer,
    integrity,
    triage_rewards,
)
from propel.tasks.triage.generate import knowledge_base

KB = knowledge_base()
DNS, NTP = KB["KB-NET-002"], KB["KB-INF-003"]
RIGHT = (
    "Query both internal resolvers with nslookup, fix the failing forwarder on the resolver service, flush the DNS "
    "cache on the clients and make sure the record exists in the zone"
)
HALF = "Query both internal resolvers with nslookup and make sure the record exists in the zone"
GOLD = {  # the worked examples' ticket (tests/rewards/test_triage_rewards.py), RIGHT as the reference resolution
    "ticket_id": "T1",
    "category": "networking",
    "ticket": "DNS broken\nUsers cannot resolve intranet names since this morning",
    "article_ids": ["KB-NET-002", "KB-INF-003", "KB-CLD-001"],
    "articles_text": f"{DNS.title}\n{DNS.body}\n{NTP.title}\n{NTP.body}",
    "gold_ids": ["KB-NET-002"],
    "gold_resolution": RIGHT,
    "gold_steps": list(DNS.steps),
    "distractor_steps": list(NTP.steps),
    "escalate": False,
}


def sample(completion: str, gold: dict | None = None) -> Sample:
    ctx = Context(id="T1", prompt=Prompt(text="ticket"), data=dict(gold or GOLD))
    return Sample(prompt="ticket", completion=completion, context=ctx)


def answer(resolution=RIGHT, citations=("KB-NET-002",), confidence=0.9, escalate=False) -> str:
    body = {"resolution": resolution, "citations": list(citations), "confidence": confidence, "escalate": escalate}
    return "submit_resolution " + json.dumps(body)


X = answer(resolution="x", confidence=0)  # no content, the gold id, the right flag, the best confidence for it
STYLE = ("format", "parsimony", "repetition")


# ------------------------------------------------------------------------------------------------ the two modes
def test_content_free_x_gets_no_gated_style_but_its_raw_style_is_logged_and_independent_pays_it():
    gated = CombinedReward(triage_rewards())
    out = gated([sample(X)])
    # gated: the parse credit only, no parsimony, no repetition; resolution 0, grounding 1, calibration 1 (conf 0)
    assert {k: float(v) for k, v in out.components.items()} == pytest.approx(
        {"format": 0.2, "resolution": 0.0, "grounding": 1.0, "calibration": 1.0, "parsimony": 0.0, "repetition": 0.0}
    )
    assert float(out.total) == pytest.approx(2.2)
    # ... but the ungated style is 1 on each, logged as <name>_raw and never paid
    assert {k: float(out.logged[f"{k}_raw"]) for k in STYLE} == {"format": 1.0, "parsimony": 1.0, "repetition": 1.0}
    stats = out.stats("reward")
    assert stats["reward/format/mean"] == pytest.approx(0.2) and stats["reward/format_raw/mean"] == 1.0
    assert stats["reward/parsimony_raw/mean"] == 1.0 and stats["reward/repetition_raw/std"] == 0.0
    # independent mode pays the raw values: 1 + 0 (ROUGE-L of "x") + 1 + 1 + 1 + 1 = 5 of 6
    free = CombinedReward(triage_rewards(INDEPENDENT))([sample(X)])
    assert {k: float(free.components[k]) for k in STYLE} == {"format": 1.0, "parsimony": 1.0, "repetition": 1.0}
    assert float(free.components["resolution"]) == 0.0 and float(free.total) == pytest.approx(5.0)
    assert {k: float(free.logged[f"{k}_raw"]) for k in STYLE} == {"format": 1.0, "parsimony": 1.0, "repetition": 1.0}


def test_raw_equals_paid_on_a_right_fix_and_the_gate_scales_a_half_fix():
    half = sample(answer(resolution=HALF))
    out = CombinedReward(triage_rewards())([sample(answer()), half, sample("no submission at all")])
    for name in STYLE:
        assert float(out.components[name][0]) == pytest.approx(float(out.logged[f"{name}_raw"][0]))  # procedure 1
        assert float(out.logged[f"{name}_raw"][2]) == 0.0 and float(out.components[name][2]) == 0.0  # rejected
    # half the steps in order: procedure 0.5, so format pays 0.2 + 0.8 * 1 * 0.5 while its raw value is 1
    assert float(out.components["format"][1]) == pytest.approx(0.6) and float(out.logged["format_raw"][1]) == 1.0
    assert float(out.components["parsimony"][1]) == pytest.approx(0.5) and float(out.logged["parsimony_raw"][1]) == 1
    assert half.info["triage"]["format_raw"] == 1.0 and half.info["triage"]["format_style"] == 1.0


def test_independent_resolution_pays_rouge_l_and_logs_step_content_and_coverage():
    scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
    for mode in (CONTENT_FIRST, INDEPENDENT):
        res = TriageResolution(mode=mode)
        texts = [RIGHT, HALF, "restart the dns resolver service", "x"]
        values = res([sample(answer(resolution=t)) for t in texts])
        logged = res.logged_values()
        rouge = [scorer.score(RIGHT, t)["rougeL"].fmeasure for t in texts]  # rouge-score itself, reference first
        assert logged["rouge_l"].tolist() == pytest.approx(rouge)
        assert logged["content"].tolist() == [1.0, 0.5, 0.25, 0.0]
        assert logged["coverage"].tolist() == [1.0, 0.5, 0.25, 0.0]  # right flag: coverage = content here
        expected = [1.0, 0.5, 0.25, 0.0] if mode == CONTENT_FIRST else rouge
        assert values.tolist() == pytest.approx(expected)
    # checked by hand: LCS("restart the resolver", "restart the dns resolver service") = 3 words: P = 3/3, R = 3/5,
    # F = 2 * 1 * 0.6 / 1.6 = 0.75
    ref = {**GOLD, "gold_resolution": "restart the dns resolver service"}
    value = TriageResolution(mode=INDEPENDENT)([sample(answer(resolution="restart the resolver"), ref)])
    assert float(value) == pytest.approx(0.75)
    # the escalate flag halves the content, not the coverage of the steps stated in place
    res = TriageResolution()
    res([sample(answer(resolution=HALF, escalate=True))])
    assert res.logged_values()["content"].tolist() == [0.25] and res.logged_values()["coverage"].tolist() == [0.5]


@pytest.mark.parametrize(
    "make", [TriageFormat, TriageResolution, CitationGrounding, TriageCalibration, Parsimony, RepetitionPenalty]
)
def test_a_bad_mode_is_a_config_error(make):
    with pytest.raises(ConfigError, match=r"mode must be one of \['content_first', 'independent'\].*'seed'"):
        make(mode="seed")
    assert make(mode=INDEPENDENT).mode == INDEPENDENT and make().mode == CONTENT_FIRST


def test_bad_modes_elsewhere_are_config_errors():
    with pytest.raises(ConfigError, match="triage_rewards: mode must be one of"):
        triage_rewards("gated")
    with pytest.raises(ConfigError, match="TriageIntegrity: mode must be one of"):
        TriageIntegrity(modes=["content_first", "Independent"])


# ------------------------------------------------------------------------------------- grounding and calibration
def test_grounding_split_into_invented_id_rate_and_gold_citation_f1():
    g = CitationGrounding()
    batch = [
        answer(citations=["KB-NET-002", "KB-FAKE-999"]),  # paid F1: P 1/2, R 1 -> 2/3; gold F1 of the retrieved: 1
        answer(citations=["KB-INF-003"]),  # a retrieved distractor: F1 0, gold F1 0, nothing invented
        answer(citations=["kb-net-002", "KB-NET-002"]),  # one distinct id: 1 and 1
        "not an answer",  # rejected: no citation counted
    ]
    paid = g([sample(a) for a in batch])
    assert paid.tolist() == pytest.approx([2 / 3, 0.0, 1.0, 0.0])
    assert g.logged_values()["gold_f1"].tolist() == [1.0, 0.0, 1.0, 0.0]
    assert g.step_stats() == {"invented_id_rate": pytest.approx(1 / 4)}  # 1 invented of 4 distinct cited ids
    out = CombinedReward([g])([sample(a) for a in batch])
    assert out.stats()["reward/grounding/invented_id_rate"] == pytest.approx(0.25)
    assert out.stats()["reward/grounding_gold_f1/mean"] == pytest.approx(0.5)
    g([sample(answer(citations=[]))])
    assert g.step_stats() == {"invented_id_rate": 0.0}


def test_calibration_auroc_equals_sklearns_beside_one_minus_brier():
    c = TriageCalibration()
    batch = [  # (resolution, confidence, escalate): right fix only for RIGHT with the right flag
        (RIGHT, 0.9, False),
        (RIGHT, 0.4, False),
        (RIGHT, 0.7, False),
        (HALF, 0.7, False),  # a tie with a right fix
        (HALF, 0.95, False),
        ("x", 0.2, False),
        (RIGHT, 0.8, True),  # wrong flag: not a right fix
        (RIGHT, "high", False),  # no valid confidence: left out
    ]
    c([sample(answer(resolution=r, confidence=p, escalate=e)) for r, p, e in batch] + [sample("nothing")])
    rated = batch[:-1]
    correct = [int(r == RIGHT and not e) for r, _, e in rated]
    confidence = [p for _, p, _ in rated]
    stats = c.step_stats()
    assert correct == [1, 1, 1, 0, 0, 0, 0]
    assert stats["auroc"] == pytest.approx(roc_auc_score(correct, confidence))
    # by hand: 3 right x 4 wrong pairs; 0.9 beats 0.7, 0.2, 0.8 (3); 0.4 beats 0.2 (1); 0.7 beats 0.2 and ties 0.7
    # (1.5): 5.5 / 12
    assert stats["auroc"] == pytest.approx(5.5 / 12)
    brier = sum((p - y) ** 2 for p, y in zip(confidence, correct, strict=True)) / len(rated)
    assert stats["one_minus_brier"] == pytest.approx(1 - brier)
    c([sample(answer(confidence=0.9)), sample(answer(confidence=0.3))])  # all right: AUROC undefined, not logged
    assert set(c.step_stats()) == {"one_minus_brier"}
    c([sample("nothing")])
    assert c.step_stats() == {}


# ------------------------------------------------------------------------------------------ the safety quantity
def test_content_free_definitions_on_a_hand_made_batch():
    totals = torch.tensor([2.0, 6.0, 3.0, 0.0, 1.5])
    honest = torch.tensor([6.0, 6.0, 6.0, 6.0, 5.0])
    procedure = [0.0, 1.0, 0.5, None, 0.0]
    out = content_free(totals, honest, procedure)
    # accepted: 4 (total > 0); content-free among them: 2; their mean total 1.75 over the honest 5.5
    assert out == pytest.approx(
        {"content_free_share": 0.5, "content_free_reward": 1.75 / 5.5, "content_free_max": 1 / 3}
    )
    assert content_free(torch.tensor([6.0, 0.0]), torch.tensor([6.0, 6.0]), [1.0, None]) == {"content_free_share": 0.0}
    assert content_free(torch.zeros(1), torch.ones(1), [None]) == {"content_free_share": 0.0}


def test_integrity_per_mode_content_first_caps_what_x_is_paid_and_independent_does_not():
    batch = [sample(X), sample(answer()), sample(answer(resolution=HALF)), sample("no json")]
    assert sample(honest_answer(GOLD)).completion == answer()  # the honest answer: reference, gold ids, flag, 0.9
    report = integrity(CombinedReward(triage_rewards()), batch)
    first, free = report[CONTENT_FIRST], report[INDEPENDENT]
    assert first["honest_total"] == pytest.approx(5.99) and free["honest_total"] == pytest.approx(5.99)
    assert first["content_free_share"] == pytest.approx(1 / 3) and free["content_free_share"] == pytest.approx(1 / 3)
    assert first["content_free_reward"] == pytest.approx(2.2 / 5.99)  # 37%
    assert free["content_free_reward"] == pytest.approx(5.0 / 5.99)  # 83%
    # the samples keep what the run paid them (scored on copies), whichever mode is reported
    assert batch[0].info == {}
    # the reward's own mode does not change the report: each mode is scored as such
    again = integrity(CombinedReward(triage_rewards(INDEPENDENT)), batch)
    assert all(again[mode] == pytest.approx(report[mode]) for mode in report)


def test_a_forced_prefix_is_read_for_the_answers_and_not_for_the_honest_one():
    prefix = 'submit_resolution {"resolution": "'
    gold = {**GOLD, "answer_prefix": prefix}
    completion = X[len(prefix) :]
    report = integrity(triage_rewards(), [sample(completion, gold)], [CONTENT_FIRST])
    assert report == {
        CONTENT_FIRST: pytest.approx(
            {
                "content_free_share": 1.0,
                "content_free_reward": 2.2 / 5.99,
                "content_free_max": 2.2 / 5.99,
                "honest_total": 5.99,
            }
        )
    }


class _Module:
    """What TriageIntegrity reads of a GRPO module: its rollout_state and reward; log_dict records."""

    def __init__(self, samples):
        self.reward = CombinedReward(triage_rewards())
        self.rollout_state = RolloutState(step=0, samples=samples, rewards=self.reward(samples))
        self.logged: list[dict] = []

    def log_dict(self, metrics, **kwargs):
        self.logged.append(metrics)


def test_the_callback_logs_both_modes_once_per_step():
    module = _Module([sample(X), sample(answer())])
    callback = TriageIntegrity()
    callback.on_train_batch_end(None, module, None, None, 0)
    callback.on_train_batch_end(None, module, None, None, 0)  # the same step's state: logged once
    assert len(module.logged) == 1
    logged = module.logged[0]
    assert logged["train/integrity/content_first/content_free_share"] == 0.5
    assert logged["train/integrity/content_first/content_free_reward"] == pytest.approx(2.2 / 5.99)
    assert logged["train/integrity/independent/content_free_reward"] == pytest.approx(5.0 / 5.99)
    assert logged["train/integrity/independent/honest_total"] == pytest.approx(5.99)
