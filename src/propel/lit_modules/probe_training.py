"""ProbeModule: a small head on frozen-reference activations predicting "this task lands in the utility band".

Head, loss, optimizer, metrics and export are defined once in ``propel.probes.classifier`` (what the sweep trains as
the heads of a ``ProbeBank``); this module drives them under a Lightning Trainer over an ``ActivationDataModule``.
"""

from __future__ import annotations

import copy

import torch
from lightning.pytorch import LightningModule
from torch import Tensor

from propel.probes.classifier import ProbeClassifier
from propel.probes.heads import ARCHS, ProbeHead


class ProbeModule(LightningModule):
    """Train a linear / MLP / deep-MLP probe with BCE-with-logits on (standardized) pooled features.

    Args:
        arch: head architecture: ``linear``, ``mlp`` or ``deep_mlp``.
        input_dim: feature width; when omitted it is read from the datamodule's ``feature_dim`` at setup.
        hidden_dim: hidden width of the MLP heads.
        dropout: dropout of the MLP heads.
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        pos_weight: BCE positive-class weight; ``auto`` takes the datamodule's (set when it balances by weights).
        standardize: standardize features with the datamodule's train-split mean/std.
        threshold: probability threshold for accuracy, balanced accuracy and F1.
        n_bins: calibration (ECE) bins.
        monitor: validation metric whose best epoch's weights are restored at fit end (``balanced_accuracy`` or
            ``loss``).
        export_dir: when set, the fitted probe is written there as a ``ProbeArtifact`` at fit end.
    """

    def __init__(
        self,
        arch: str = "linear",
        input_dim: int | None = None,
        hidden_dim: int = 256,
        dropout: float = 0.1,
        lr: float = 1e-3,
        weight_decay: float = 1e-2,
        pos_weight: float | str | None = "auto",
        standardize: bool = True,
        threshold: float = 0.5,
        n_bins: int = 15,
        monitor: str = "balanced_accuracy",
        export_dir: str | None = None,
    ):
        super().__init__()
        if arch not in ARCHS:
            raise ValueError(f"arch: unknown {arch!r}; choose from {', '.join(ARCHS)}")
        if monitor not in ("balanced_accuracy", "loss"):
            raise ValueError(f"monitor: choose balanced_accuracy or loss, got {monitor!r}")
        if isinstance(pos_weight, str) and pos_weight != "auto":
            raise ValueError(f"pos_weight: a positive number, 'auto' or null, got {pos_weight!r}")
        self.save_hyperparameters()
        self.head: ProbeHead | None = None
        self._pos_weight: float | None = pos_weight if isinstance(pos_weight, (int, float)) else None
        if input_dim is not None:
            self.build(input_dim)
        self._outputs: dict[str, list[tuple[Tensor, Tensor, Tensor]]] = {"val": [], "test": []}
        self._best: tuple[float, dict, dict] | None = None  # (score, head state, val metrics) of the best epoch
        self.last_metrics: dict[str, float] = {}

    # --- definition (the objective lives in propel.probes.classifier, shared with the sweep) ---
    def build(self, input_dim: int) -> ProbeHead:
        """Create the head (idempotent for the same width)."""
        if self.head is None or self.head.input_dim != input_dim:
            h = self.hparams
            self.head = ProbeHead(h.arch, int(input_dim), h.hidden_dim, h.dropout)
            self.hparams.input_dim = int(input_dim)
        return self.head

    def forward(self, features: Tensor) -> Tensor:
        """Logits [B] of features [B, D]."""
        if self.head is None:
            raise RuntimeError("ProbeModule has no head yet: pass input_dim or fit with a datamodule")
        return self.head(features)

    def classifier(self) -> ProbeClassifier:
        """This module's head with the probe objective (``ProbeClassifier.around``: shared, not copied): the one
        definition of the loss, metrics, optimizer and export that the sweep's heads use too."""
        if self.head is None:
            raise RuntimeError("ProbeModule has no head yet: pass input_dim or fit with a datamodule")
        h = self.hparams
        return ProbeClassifier.around(
            self.head, lr=h.lr, weight_decay=h.weight_decay, pos_weight=self._pos_weight, threshold=h.threshold,
            n_bins=h.n_bins,
        )  # fmt: skip

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        """BCE-with-logits, with ``pos_weight`` when set."""
        return self.classifier().loss(logits, labels)

    def metrics(self, logits: Tensor, labels: Tensor, solve_counts: Tensor | None = None) -> dict[str, float]:
        """All probe metrics (plus loss) of one split."""
        return self.classifier().metrics(logits, labels, solve_counts)

    def configure_optimizers(self):
        return self.classifier().configure_optimizers()

    # --- Lightning hooks ---
    def setup(self, stage: str) -> None:
        dm = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        if self.head is None:
            dim = getattr(dm, "feature_dim", None)
            if dim is None:
                raise ValueError("input_dim: not set and the datamodule has no feature_dim; set model.input_dim")
            self.build(dim)
        if stage == "fit" and dm is not None:
            if self.hparams.standardize and getattr(dm, "feature_mean", None) is not None:
                self.head.set_normalization(dm.feature_mean, dm.feature_std)
            if self.hparams.pos_weight == "auto":
                self._pos_weight = getattr(dm, "pos_weight", None)

    @staticmethod
    def _unpack(batch) -> tuple[Tensor, Tensor, Tensor]:
        features, labels = batch[0], batch[1]
        solve = batch[2] if len(batch) > 2 else torch.full_like(labels, float("nan"))
        return features, labels, solve

    def training_step(self, batch, batch_idx):
        x, y, _ = self._unpack(batch)
        loss = self.loss(self(x), y)
        self.log("train/loss", loss, prog_bar=True, batch_size=len(y))
        return loss

    def validation_step(self, batch, batch_idx):
        x, y, s = self._unpack(batch)
        self._outputs["val"].append((self(x).detach(), y, s))

    def test_step(self, batch, batch_idx):
        x, y, s = self._unpack(batch)
        self._outputs["test"].append((self(x).detach(), y, s))

    def predict_step(self, batch, batch_idx):
        return self(self._unpack(batch)[0])

    def _epoch_metrics(self, split: str) -> dict[str, float]:
        outs = self._outputs[split]
        self._outputs[split] = []
        if not outs:
            return {}
        logits, labels, solve = (torch.cat(parts) for parts in zip(*outs, strict=True))
        logits, labels, solve = (self.all_gather(t).reshape(-1) for t in (logits, labels, solve))
        solve = None if torch.isnan(solve).all() else solve
        m = self.metrics(logits, labels, solve)
        self.log_dict({f"{split}/{k}": v for k, v in m.items()}, sync_dist=False)
        self.last_metrics.update({f"{split}_{k}": v for k, v in m.items()})
        return m

    def on_validation_epoch_end(self) -> None:
        m = self._epoch_metrics("val")
        if not m or self.trainer.sanity_checking:
            return
        score = m[self.hparams.monitor] * (1 if self.hparams.monitor == "balanced_accuracy" else -1)
        if self._best is None or score > self._best[0]:
            self._best = (score, copy.deepcopy(self.head.state_dict()), dict(m))

    def on_test_epoch_end(self) -> None:
        self._epoch_metrics("test")

    def on_fit_end(self) -> None:
        """Restore the best validation epoch's weights, then export if asked."""
        if self._best is not None:
            self.head.load_state_dict(self._best[1])
            self.last_metrics.update({f"val_{k}": v for k, v in self._best[2].items()})
        if self.hparams.export_dir:
            info = getattr(self.trainer.datamodule, "feature_info", {}) if self.trainer.datamodule else {}
            self.classifier().to_artifact(metrics=self.last_metrics, **info).save(self.hparams.export_dir)
