"""CollapseDetector in a real Lightning fit loop whose module's generations collapse after a few steps."""

from __future__ import annotations

import re

import lightning.pytorch as pl
import pytest
import torch

from propel.callbacks.collapse import CollapseDetector
from propel.lit_modules.state import RolloutState
from propel.records import Sample

DIVERSE = [f"task {i} about topic{i % 4} with words a{i} b{i * 7} c{i * 13}" for i in range(8)]
COLLAPSED = ["the same task about sums of two numbers"] * 8


class _Generating(pl.LightningModule):
    """Trains a scalar; its 'generations' turn into one repeated text from step ``collapse_at`` on."""

    def __init__(self, collapse_at: int):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.collapse_at = collapse_at
        self.rollout_state: RolloutState | None = None

    def training_step(self, batch, batch_idx):
        collapsed = self.global_step + 1 >= self.collapse_at
        texts = COLLAPSED if collapsed else DIVERSE
        topics = ["sums"] * 8 if collapsed else [f"topic{i % 4}" for i in range(8)]
        samples = [
            Sample("p", t, valid=True, topic=k, info={"task_text": t}) for t, k in zip(texts, topics, strict=True)
        ]
        self.rollout_state = RolloutState(step=self.global_step, samples=samples)
        return (self.w - batch.mean()) ** 2

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.randn(64, 1), batch_size=2)


def _fit(detector: CollapseDetector, collapse_at: int, max_steps: int = 12) -> pl.Trainer:
    trainer = pl.Trainer(
        max_steps=max_steps,
        callbacks=[detector],
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
    )
    trainer.fit(_Generating(collapse_at))
    return trainer


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    """The trainers' root folder (where the detector writes its alarms) is the test's own."""
    monkeypatch.chdir(tmp_path)


def _alarms(caplog) -> list[str]:
    """The collapse lines propel's logger printed (a logger record, not a Python warning: no file path, no category)."""
    return [r.getMessage() for r in caplog.records if r.name == "propel.callbacks.collapse"]


def test_stop_action_stops_training_after_collapse(caplog, recwarn):
    detector = CollapseDetector(every_n_steps=2, action="stop")
    with caplog.at_level("WARNING", logger="propel.callbacks.collapse"):
        trainer = _fit(detector, collapse_at=5)
    assert [a.startswith("propel: mode collapse") and "Self-BLEU-3" in a for a in _alarms(caplog)] == [True]
    assert not [w for w in recwarn if "collapse" in str(w.message)]  # printed as propel's lines, not as a warning
    assert trainer.global_step == 6  # checked at 2, 4 (diverse) and 6 (collapsed) -> stop
    assert trainer.should_stop
    assert trainer.callback_metrics["collapse/self_bleu"].item() == pytest.approx(1.0)
    assert trainer.callback_metrics["collapse/top_topic"].item() == pytest.approx(1.0)
    assert "Distinct-3" in detector.breaches[0] and "top-topic" in detector.breaches[0]


def test_warn_action_keeps_training_and_diverse_generations_pass(caplog):
    detector = CollapseDetector(every_n_steps=3, action="warn")
    with caplog.at_level("WARNING", logger="propel.callbacks.collapse"):
        trainer = _fit(detector, collapse_at=9)
    assert len(_alarms(caplog)) == 2 and all(a.startswith("propel: mode collapse") for a in _alarms(caplog))
    assert trainer.global_step == 12
    assert len(detector.breaches) == 2  # steps 9 and 12; step 3 and 6 were diverse
    clean = CollapseDetector(every_n_steps=2)
    assert clean.check(clean.measure(DIVERSE, [f"topic{i % 4}" for i in range(8)])) == []


def test_bad_action():
    with pytest.raises(ValueError, match="action"):
        CollapseDetector(action="explode")


def test_metrics_cover_all_generations_with_valid_only_variants_labelled():
    """The paper's collapse metrics are over all generations: a policy whose valid tasks are diverse but whose many
    malformed generations are one repeated text has collapsed. Valid-only numbers carry ``_valid``; a metric without
    a value (one valid text) is absent, not 0.0."""
    detector = CollapseDetector(min_samples=4)
    samples = [Sample("p", DIVERSE[0], valid=True, topic="topic0", info={"task_text": DIVERSE[0]})]
    samples += [Sample("p", COLLAPSED[0], valid=False) for _ in range(7)]
    metrics = detector.measure_samples(samples)
    assert metrics["collapse/self_bleu"] > 0.8 and metrics["collapse/distinct"] < 0.3
    assert metrics["collapse/top_topic"] == pytest.approx(1 / 8)
    assert "collapse/self_bleu_valid" not in metrics and metrics["collapse/top_topic_valid"] == 1.0
    assert any("Self-BLEU-3" in b for b in detector.check(metrics))
    two_valid = samples + [Sample("p", DIVERSE[1], valid=True, info={"task_text": DIVERSE[1]})]
    assert detector.measure_samples(two_valid)["collapse/self_bleu_valid"] < 0.5


# --------------------------------------------------------------------------------- degeneration monitors
def _math_samples(degenerate_share: float, n: int = 16, copies: int = 0, seed: int = 0) -> list[Sample]:
    """``n`` parsed math tasks scored by the real domain and scorer: a ``degenerate_share`` of them state their
    answer; the first ``copies`` of the honest ones repeat an example of their prompt."""
    import random

    from propel.domains import MathExpressionDomain
    from propel.rollouts.scorer import GeneratorScorer

    rng = random.Random(seed)
    domain = MathExpressionDomain()
    prompt = domain.contexts(1, seed=seed)[0].prompt.text
    example = prompt.split("Problem:")[1].split("\nExpression:")
    out = []
    for i in range(n):
        a, b = rng.randrange(3, 90), rng.randrange(3, 90)
        if i < round(degenerate_share * n):
            text = f" There are {a} cats on {b} mats. How many cats are there?\nExpression: {a}"
        elif i - round(degenerate_share * n) < copies:
            text = f"{example[0]}\nExpression:{example[1].split(chr(10))[0]}"
        else:
            text = f" {a} boxes hold {b} pens each. How many pens in all?\nExpression: {a} * {b}"
        out.append(Sample(prompt, text))
    GeneratorScorer(domain).score(out)
    return out


def test_monitors_count_degenerate_reasons_copies_templates_and_answer_sizes():
    from propel.callbacks.collapse import degeneration, monitor_flags

    samples = _math_samples(0.25, n=16, copies=2)
    metrics = degeneration(samples)
    assert metrics["monitor/degenerate"] == pytest.approx(0.25)
    assert metrics["monitor/degenerate_answer_stated"] == pytest.approx(0.25)
    assert metrics["monitor/copies"] == pytest.approx(2 / 16)
    assert metrics["monitor/top_template"] >= 10 / 16  # the honest tasks share one template (numbers masked)
    assert 0 < metrics["monitor/answer_log10_q10"] <= metrics["monitor/answer_log10_median"]
    assert [monitor_flags(s) for s in samples[:1]] == [["degenerate:answer_stated"]]
    assert "copy" in monitor_flags(samples[4]) and monitor_flags(samples[-1]) == []


class _Drifting(_Generating):
    """Its tasks turn degenerate from step ``collapse_at`` on (stating their answer), otherwise honest."""

    def training_step(self, batch, batch_idx):
        share = 0.75 if self.global_step + 1 >= self.collapse_at else 0.0
        self.rollout_state = RolloutState(step=self.global_step, samples=_math_samples(share, seed=self.global_step))
        return (self.w - batch.mean()) ** 2


def test_a_planted_degenerate_drift_trips_the_alarm_and_a_steady_run_does_not(caplog):
    def fit(collapse_at):
        detector = CollapseDetector(every_n_steps=2, self_bleu_max=None, distinct_min=None, top_topic_max=None)
        trainer = pl.Trainer(max_steps=8, callbacks=[detector], logger=False, enable_checkpointing=False,
                             enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")  # fmt: skip
        trainer.fit(_Drifting(collapse_at))
        return detector

    with caplog.at_level("WARNING", logger="propel.callbacks.collapse"):
        drifted = fit(collapse_at=5)
    assert any(re.match(r"propel: .*monitor/degenerate 0\.000 -> 0\.750", a) for a in _alarms(caplog))
    assert drifted.start_metrics["monitor/degenerate"] == 0.0 and drifted.breaches
    assert any("monitor/degenerate_answer_stated 0.000 -> 0.750" in b for b in drifted.breaches)
    assert not fit(collapse_at=100).breaches  # honest all along: no alarm


class _Recovering(_Generating):
    """Its tasks start degenerate (stating their answer) and turn honest from step ``collapse_at`` on."""

    def training_step(self, batch, batch_idx):
        share = 0.0 if self.global_step + 1 >= self.collapse_at else 0.75
        self.rollout_state = RolloutState(step=self.global_step, samples=_math_samples(share, seed=self.global_step))
        return (self.w - batch.mean()) ** 2


def test_a_generator_that_degenerates_less_than_it_started_is_no_alarm():
    detector = CollapseDetector(every_n_steps=2, self_bleu_max=None, distinct_min=None, top_topic_max=None)
    trainer = pl.Trainer(max_steps=8, callbacks=[detector], logger=False, enable_checkpointing=False,
                         enable_progress_bar=False, enable_model_summary=False, accelerator="cpu")  # fmt: skip
    trainer.fit(_Recovering(5))
    assert detector.start_metrics["monitor/degenerate"] == 0.75 and detector.last_metrics["monitor/degenerate"] == 0.0
    assert not any("monitor/degenerate" in b for b in detector.breaches)  # (the honest tasks share one template)
    # each share alarms in the direction that is degeneration: fewer distinct templates, a larger top topic
    start = {"monitor/distinct_templates": 0.8, "monitor/top_topic": 0.6, "monitor/top_topic_valid": 0.6}
    detector.start_metrics = dict(start)
    assert detector.check({"monitor/distinct_templates": 1.0, "monitor/top_topic": 0.3}) == []
    fell = detector.check({"monitor/distinct_templates": 0.5, "monitor/top_topic_valid": 0.9})
    assert len(fell) == 2 and "-0.300" in fell[0] and "+0.300" in fell[1]
