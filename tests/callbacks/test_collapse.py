"""CollapseDetector in a real Lightning fit loop whose module's generations collapse after a few steps."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

from propel.callbacks.collapse import CollapseDetector
from propel.lit_modules.state import RolloutState
from propel.rollouts import Sample

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


def test_stop_action_stops_training_after_collapse():
    detector = CollapseDetector(every_n_steps=2, action="stop")
    with pytest.warns(RuntimeWarning, match="Self-BLEU-3"):
        trainer = _fit(detector, collapse_at=5)
    assert trainer.global_step == 6  # checked at 2, 4 (diverse) and 6 (collapsed) -> stop
    assert trainer.should_stop
    assert trainer.callback_metrics["collapse/self_bleu"].item() == pytest.approx(1.0)
    assert trainer.callback_metrics["collapse/top_topic"].item() == pytest.approx(1.0)
    assert "Distinct-3" in detector.breaches[0] and "top-topic" in detector.breaches[0]


def test_warn_action_keeps_training_and_diverse_generations_pass():
    detector = CollapseDetector(every_n_steps=3, action="warn")
    with pytest.warns(RuntimeWarning, match="mode collapse"):
        trainer = _fit(detector, collapse_at=9)
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
