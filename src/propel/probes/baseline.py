"""Baselines a probe must beat, on the same rows: logistic regression (scikit-learn) on the same features, and two
that read no activations at all: the input's length alone and its topic alone. A probe that does not beat the last
two has learned the task's surface, not what the reference model represents about it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from propel.metrics.classification import binary_metrics


def fit_logistic(x_train, y_train, *, balance: str = "downsample", c: float = 1.0, seed: int = 0):
    """A fitted standardize + L2 logistic regression; ``balance="weighted"`` uses ``class_weight="balanced"``
    (downsampling is done by the caller)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    clf = make_pipeline(
        StandardScaler(),
        LogisticRegression(
            C=c, max_iter=2000, class_weight="balanced" if balance == "weighted" else None, random_state=seed
        ),
    )
    clf.fit(np.asarray(x_train, dtype=np.float64), np.asarray(y_train).astype(int))
    return clf


def logistic_baseline(
    x_train: Tensor,
    y_train: Tensor,
    evals: dict[str, tuple[Tensor, Tensor, Tensor | None]],
    *,
    balance: str = "downsample",
    c: float = 1.0,
    seed: int = 0,
) -> dict[str, float]:
    """Fit ``fit_logistic`` on the train rows; metrics ``{split}_{name}`` for each eval split."""
    clf = fit_logistic(x_train.numpy(), y_train.numpy(), balance=balance, c=c, seed=seed)
    out: dict[str, float] = {}
    for split, (x, y, solve) in evals.items():
        logits = torch.as_tensor(np.asarray(clf.decision_function(x.numpy())), dtype=torch.float32)
        for name, value in binary_metrics(logits, y, solve).items():
            out[f"{split}_{name}"] = value
    return out


def input_length(item) -> float:
    """Characters of a probe input: a text, or a list of turns (their ``content`` or their text)."""
    if isinstance(item, str):
        return float(len(item))
    return float(sum(len(t.get("content") or "") if isinstance(t, dict) else len(str(t)) for t in item))


def length_only_predictions(train_items: Sequence, y_train, test_items: Sequence) -> np.ndarray:
    """Labels predicted from the log length of the input alone (class-balanced logistic regression)."""
    lengths = [np.log1p([[input_length(i)] for i in items]) for items in (train_items, test_items)]
    return fit_logistic(lengths[0], y_train, balance="weighted").predict(lengths[1]).astype(bool)


def topic_only_predictions(train_topics: Sequence[str], y_train, test_topics: Sequence[str]) -> np.ndarray:
    """Labels predicted from the topic alone: positive where the topic's positive rate on the train rows exceeds
    the overall rate (the rule that maximizes balanced accuracy on the train rows); an unseen topic is negative."""
    y = np.asarray(y_train, dtype=float)
    overall = y.mean() if len(y) else 0.0
    rate: dict[str, float] = {}
    for topic in set(train_topics):
        mask = np.array([t == topic for t in train_topics])
        rate[topic] = float(y[mask].mean())
    return np.array([rate.get(t, -1.0) > overall for t in test_topics], dtype=bool)
