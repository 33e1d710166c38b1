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
