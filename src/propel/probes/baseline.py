"""Logistic-regression baseline (scikit-learn) on the same features and splits as the probe sweep."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from propel.metrics.classification import binary_metrics


def logistic_baseline(
    x_train: Tensor,
    y_train: Tensor,
    evals: dict[str, tuple[Tensor, Tensor, Tensor | None]],
    *,
    balance: str = "downsample",
    c: float = 1.0,
    seed: int = 0,
) -> dict[str, float]:
    """Fit standardize + L2 logistic regression on the train rows; metrics ``{split}_{name}`` for each eval split.

    ``balance="weighted"`` uses scikit-learn's ``class_weight="balanced"``; downsampling is done by the caller.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(
        StandardScaler(),
        LogisticRegression(
            C=c, max_iter=2000, class_weight="balanced" if balance == "weighted" else None, random_state=seed
        ),
    )
    clf.fit(x_train.numpy(), y_train.numpy().astype(int))
    out: dict[str, float] = {}
    for split, (x, y, solve) in evals.items():
        logits = torch.as_tensor(np.asarray(clf.decision_function(x.numpy())), dtype=torch.float32)
        for name, value in binary_metrics(logits, y, solve).items():
            out[f"{split}_{name}"] = value
    return out
