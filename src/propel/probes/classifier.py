"""The probe's training objective, defined once: BCE-with-logits, AdamW, metrics and artifact export.

``ProbeClassifier`` (a plain ``nn.Module``: head + objective) is what the sweep trains, hundreds at a time, as the
heads of a ``propel.probes.bank.ProbeBank``; ``propel.lit_modules.probe_training.ProbeModule`` is a shell that drives
one over a datamodule (``ProbeClassifier.around`` its head), so loss, metrics, optimizer and export are this
module's.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from propel.metrics.classification import binary_metrics
from propel.probes.artifact import ProbeArtifact
from propel.probes.heads import ProbeHead


def probe_loss(logits: Tensor, labels: Tensor, pos_weight: float | None = None) -> Tensor:
    """BCE-with-logits, with ``pos_weight`` (class-weighted balance) when set."""
    pw = None if pos_weight is None else torch.tensor(pos_weight, device=logits.device)
    return F.binary_cross_entropy_with_logits(logits, labels.float(), pos_weight=pw)


def probe_metrics(
    logits: Tensor,
    labels: Tensor,
    solve_counts: Tensor | None = None,
    *,
    pos_weight: float | None = None,
    threshold: float = 0.5,
    n_bins: int = 15,
) -> dict[str, float]:
    """All probe metrics of one split (accuracy, balanced accuracy, F1, ECE, AUROC, Spearman) plus the loss."""
    out = binary_metrics(logits, labels, solve_counts, threshold=threshold, n_bins=n_bins)
    out["loss"] = float(probe_loss(logits.detach().float(), labels, pos_weight))
    return out


def probe_optimizer(parameters, lr: float = 1e-3, weight_decay: float = 1e-2) -> torch.optim.Optimizer:
    """AdamW, the PROPEL paper's probe recipe (lr 1e-3, weight decay 1e-2)."""
    return torch.optim.AdamW(parameters, lr=lr, weight_decay=weight_decay)


class ProbeClassifier(nn.Module):
    """A probe head with its objective: what a ``HeadFit`` trains and ``refit_selected`` returns.

    Args:
        arch: ``linear``, ``mlp`` or ``deep_mlp``.
        input_dim: feature width.
        hidden_dim: hidden width of the MLP heads.
        dropout: dropout of the MLP heads.
        lr: AdamW learning rate.
        weight_decay: AdamW weight decay.
        pos_weight: BCE positive-class weight (None: unweighted).
        threshold: probability threshold for accuracy, balanced accuracy and F1.
        n_bins: calibration (ECE) bins.
    """

    def __init__(
        self,
        arch: str,
        input_dim: int,
        hidden_dim: int = 256,
        dropout: float = 0.1,
        lr: float = 1e-3,
        weight_decay: float = 1e-2,
        pos_weight: float | None = None,
        threshold: float = 0.5,
        n_bins: int = 15,
    ):
        super().__init__()
        self.head = ProbeHead(arch, int(input_dim), hidden_dim, dropout)
        self.lr, self.weight_decay, self.pos_weight = lr, weight_decay, pos_weight
        self.threshold, self.n_bins = threshold, n_bins
        self.last_metrics: dict[str, float] = {}

    @classmethod
    def around(
        cls,
        head: ProbeHead,
        *,
        lr: float = 1e-3,
        weight_decay: float = 1e-2,
        pos_weight: float | None = None,
        threshold: float = 0.5,
        n_bins: int = 15,
    ) -> ProbeClassifier:
        """A classifier over an existing head (shared, not copied): how ``ProbeModule`` scores and exports the head
        it trains under a Trainer, so the objective and the export are this class's."""
        module = cls.__new__(cls)
        nn.Module.__init__(module)
        module.head = head
        module.lr, module.weight_decay, module.pos_weight = lr, weight_decay, pos_weight
        module.threshold, module.n_bins = threshold, n_bins
        module.last_metrics = {}
        return module

    def forward(self, features: Tensor) -> Tensor:
        """Logits [B] of features [B, D]."""
        return self.head(features)

    def loss(self, logits: Tensor, labels: Tensor) -> Tensor:
        return probe_loss(logits, labels, self.pos_weight)

    def metrics(self, logits: Tensor, labels: Tensor, solve_counts: Tensor | None = None) -> dict[str, float]:
        return probe_metrics(
            logits, labels, solve_counts, pos_weight=self.pos_weight, threshold=self.threshold, n_bins=self.n_bins
        )

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return probe_optimizer(self.parameters(), self.lr, self.weight_decay)

    def to_artifact(
        self,
        reference_model: str = "unknown",
        layer: int = -1,
        pooling: str = "unknown",
        trajectory_pooling: str = "mean",
        max_length: int = 1024,
        metrics: dict | None = None,
        reference: dict | None = None,
    ) -> ProbeArtifact:
        """The head as a Lightning-free ``ProbeArtifact`` (a copy on CPU, so training can go on; ``metrics``
        defaults to ``last_metrics``). ``reference`` is the features' ``reference_fingerprint`` (cache metadata),
        checked when the probe is bound."""
        return ProbeArtifact(
            head=copy.deepcopy(self.head).cpu().eval(),
            reference_model=reference_model,
            layer=layer,
            pooling=pooling,
            trajectory_pooling=trajectory_pooling,
            max_length=max_length,
            threshold=self.threshold,
            metrics=dict(self.last_metrics if metrics is None else metrics),
            reference=reference,
        )
