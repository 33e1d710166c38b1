"""Several classifiers on the same held-out rows: each one's balanced accuracy with a bootstrap interval, and its
difference from chance and from a reference classifier, resampled *paired* (the same rows for all in each draw).

A probe's held-out number without an interval says little at the pool sizes a small run labels (85 valid tasks,
11 positives): balanced accuracy 0.53 there is not distinguishable from chance, and 0.53 vs 0.48 is not a win over
the baseline. Rows are resampled within each class (a stratified bootstrap), so every draw keeps both classes and
its balanced accuracy is defined; the replicates are seeded.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from propel.metrics.intervals import Interval, percentile_interval

CHANCE = 0.5
"""Balanced accuracy of any classifier that ignores its input."""


def balanced_accuracy(labels: np.ndarray, predictions: np.ndarray) -> np.ndarray:
    """Balanced accuracy (mean of the two recalls) along the last axis: ``predictions`` may hold one row per
    bootstrap draw, with ``labels`` of the same shape."""
    labels, predictions = np.asarray(labels, dtype=bool), np.asarray(predictions, dtype=bool)
    pos, neg = labels.sum(-1), (~labels).sum(-1)
    tpr = (predictions & labels).sum(-1) / np.maximum(pos, 1)
    tnr = (~predictions & ~labels).sum(-1) / np.maximum(neg, 1)
    return (tpr + tnr) / 2


def _classes(y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    pos_idx, neg_idx = np.flatnonzero(y), np.flatnonzero(~y)
    if not len(pos_idx) or not len(neg_idx):
        raise ValueError(f"held-out rows need both classes, got {len(pos_idx)} positives and {len(neg_idx)} negatives")
    return pos_idx, neg_idx


def _stratified_draws(pos_idx: np.ndarray, neg_idx: np.ndarray, n_resamples: int, seed: int):
    """``(positive rows, negative rows)`` of each bootstrap draw, ``[n_resamples, class size]`` each (seeded)."""
    rng = np.random.default_rng(seed)
    return (
        pos_idx[rng.integers(0, len(pos_idx), (n_resamples, len(pos_idx)))],
        neg_idx[rng.integers(0, len(neg_idx), (n_resamples, len(neg_idx)))],
    )


def auroc_interval(labels, scores, n_resamples: int = 2000, confidence: float = 0.95, seed: int = 0) -> dict:
    """The AUROC of ``scores`` against ``labels`` (what GRPO uses of a probe: its ranking) with a class-stratified
    bootstrap interval, as ``Interval.as_dict``; 0.5 is chance."""
    y = np.asarray(labels, dtype=bool).reshape(-1)
    s = np.asarray(scores, dtype=float).reshape(-1)
    if s.shape != y.shape:
        raise ValueError(f"scores: {s.size} for {y.size} labels")
    import torch
    from torchmetrics.functional.classification import binary_auroc

    def auroc(rows: np.ndarray) -> float:  # torchmetrics', as the probe sweep's: ties count half
        return float(binary_auroc(torch.from_numpy(s[rows]), torch.from_numpy(y[rows]).long(), validate_args=False))

    pos_idx, neg_idx = _classes(y)
    draws = np.concatenate(_stratified_draws(pos_idx, neg_idx, n_resamples, seed), axis=1)
    low, high = percentile_interval(np.array([auroc(rows) for rows in draws]), confidence)
    estimate = auroc(np.concatenate([pos_idx, neg_idx]))
    return Interval(estimate, low, high, confidence, "stratified_bootstrap").as_dict()


def compare_on_held_out(
    labels,
    predictions: Mapping[str, np.ndarray],
    subject: str,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, dict]:
    """For each classifier: ``balanced_accuracy`` and ``vs_chance`` (its balanced accuracy - 0.5, an interval as
    ``Interval.as_dict``); for ``subject`` also ``vs_<other>`` for every other classifier (subject's minus the
    other's, paired); the held-out ``positives`` and ``negatives`` under ``"rows"``."""
    y = np.asarray(labels, dtype=bool).reshape(-1)
    if subject not in predictions:
        raise ValueError(f"subject {subject!r} is not among the classifiers {sorted(predictions)}")
    preds = {k: np.asarray(v, dtype=bool).reshape(-1) for k, v in predictions.items()}
    for name, p in preds.items():
        if p.shape != y.shape:
            raise ValueError(f"{name}: {p.size} predictions for {y.size} labels")
    pos_idx, neg_idx = _classes(y)
    draws = np.concatenate(_stratified_draws(pos_idx, neg_idx, n_resamples, seed), axis=1)
    replicates = {k: balanced_accuracy(y[draws], p[draws]) for k, p in preds.items()}
    point = {k: float(balanced_accuracy(y, p)) for k, p in preds.items()}

    def interval(estimate: float, reps: np.ndarray) -> dict:
        low, high = percentile_interval(reps, confidence)
        return Interval(estimate, low, high, confidence, "paired_bootstrap").as_dict()

    out: dict[str, dict] = {"rows": {"positives": int(len(pos_idx)), "negatives": int(len(neg_idx))}}
    for name in preds:
        row = {
            "balanced_accuracy": point[name],
            "vs_chance": interval(point[name] - CHANCE, replicates[name] - CHANCE),
        }
        out[name] = row
    for other in preds:
        if other != subject:
            diff = replicates[subject] - replicates[other]
            out[subject][f"vs_{other}"] = interval(point[subject] - point[other], diff)
    return out
