"""Calibration of binary probabilities: reliability bins and expected calibration error (ECE).

Binning follows torchmetrics' ``BinaryCalibrationError`` (uniform bins over [0, 1], left-closed), so the numbers
here and in logged torchmetrics values are the same; these functions also return the per-bin table for plots.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor


def _check_probs(probs: Tensor) -> Tensor:
    probs = probs.detach().float().flatten()
    if probs.numel() and (probs.min() < 0 or probs.max() > 1):
        raise ValueError("probs: calibration needs probabilities in [0, 1]; apply sigmoid to logits first")
    return probs


@dataclass(frozen=True)
class ReliabilityBins:
    """Per-bin mean confidence, positive rate and count (bins with no rows have count 0)."""

    edges: Tensor
    confidence: Tensor
    accuracy: Tensor
    count: Tensor

    @property
    def ece(self) -> float:
        """Count-weighted mean gap between confidence and observed positive rate."""
        total = self.count.sum()
        if total == 0:
            return float("nan")
        return float(((self.confidence - self.accuracy).abs() * self.count).sum() / total)


def reliability_bins(probs: Tensor, labels: Tensor, n_bins: int = 15) -> ReliabilityBins:
    """Bin positive-class probabilities against 0/1 labels into ``n_bins`` uniform bins (+1 for exactly 1.0)."""
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    probs = _check_probs(probs)
    labels = labels.detach().float().flatten()
    if labels.shape != probs.shape:
        raise ValueError(f"labels: expected {tuple(probs.shape)} to match probs, got {tuple(labels.shape)}")
    edges = torch.linspace(0, 1, n_bins + 1)
    idx = torch.bucketize(probs, edges, right=True) - 1
    size = n_bins + 1
    count = torch.zeros(size).scatter_add_(0, idx, torch.ones_like(probs))
    conf = torch.zeros(size).scatter_add_(0, idx, probs)
    acc = torch.zeros(size).scatter_add_(0, idx, labels)
    safe = count.clamp(min=1)
    return ReliabilityBins(edges=edges, confidence=conf / safe, accuracy=acc / safe, count=count)


def expected_calibration_error(probs: Tensor, labels: Tensor, n_bins: int = 15) -> float:
    """ECE (L1) of positive-class probabilities; equals torchmetrics ``BinaryCalibrationError(n_bins)``."""
    return reliability_bins(probs, labels, n_bins).ece
