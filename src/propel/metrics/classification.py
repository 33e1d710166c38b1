"""Binary probe metrics from logits: accuracy, balanced accuracy, F1, AUROC, ECE and Spearman vs solve rate.

One function used by ``ProbeModule`` (epoch end) and by the sweep's fast loop, so both report the same numbers.
"""

from __future__ import annotations

import warnings

import torch
from torch import Tensor
from torchmetrics.functional.classification import (
    binary_accuracy,
    binary_auroc,
    binary_calibration_error,
    binary_f1_score,
    multiclass_recall,
)
from torchmetrics.functional.regression import spearman_corrcoef

METRIC_NAMES = ("accuracy", "balanced_accuracy", "f1", "auroc", "ece", "spearman")


def binary_metrics(
    logits: Tensor,
    labels: Tensor,
    solve_counts: Tensor | None = None,
    *,
    threshold: float = 0.5,
    n_bins: int = 15,
) -> dict[str, float]:
    """Metrics of one split; balanced accuracy, AUROC and Spearman are NaN where undefined (one class, constant input).

    Balanced accuracy is the macro recall over the two classes; ECE is computed on sigmoid probabilities.
    """
    logits = logits.detach().float().flatten()
    y = labels.detach().long().flatten()
    if logits.shape != y.shape:
        raise ValueError(f"labels: expected {tuple(logits.shape)} to match logits, got {tuple(y.shape)}")
    if logits.numel() == 0:
        return dict.fromkeys(METRIC_NAMES, float("nan"))
    probs = torch.sigmoid(logits)
    preds = (probs >= threshold).long()
    out = {
        "accuracy": float(binary_accuracy(probs, y, threshold=threshold)),
        "balanced_accuracy": balanced_accuracy(preds, y),
        "f1": float(binary_f1_score(probs, y, threshold=threshold)),
        "auroc": float(binary_auroc(probs, y)) if y.unique().numel() == 2 else float("nan"),
        "ece": float(binary_calibration_error(probs, y, n_bins=n_bins, norm="l1")),
        "spearman": float("nan"),
    }
    if solve_counts is not None:
        s = solve_counts.detach().float().flatten()
        if s.numel() > 1 and s.std() > 0 and logits.std() > 0:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                out["spearman"] = float(spearman_corrcoef(logits, s))
    return out


def balanced_accuracy(preds: Tensor, y: Tensor) -> float:
    """Mean recall over the two classes; NaN when ``y`` lacks one (a constant predictor would otherwise score 1.0)."""
    if y.unique().numel() < 2:
        return float("nan")
    recall = multiclass_recall(preds, y, num_classes=2, average="none")
    return float(recall.mean())
