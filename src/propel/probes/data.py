"""Join cached features with task-pool labels (``propel.pools.read_labels``): the labeled rows a probe trains on.

The pool has one row per task with at least ``id`` and ``label`` (1 = in the utility band, 0 = outside, null =
invalid or unlabeled); ``solve_count``, ``group`` and ``valid`` are used when present. Null-label and invalid rows
are dropped; feature rows are matched to pool rows by id.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor


@dataclass
class LabeledRows:
    """Labels of the usable rows and where each one sits in the feature matrix."""

    rows: np.ndarray  # index into the feature matrix, one per labeled row
    labels: Tensor  # float 0/1
    solve_counts: Tensor  # float, NaN where the pool has no solve_count
    groups: np.ndarray | None
    ids: list[str]


def align_labels(feature_ids: list[str], labels_df) -> LabeledRows:
    """Keep pool rows with a 0/1 label (and ``valid`` true when given) that have features; order follows the pool."""
    df = labels_df[labels_df["label"].notna()]
    if "valid" in df.columns:
        df = df[df["valid"].fillna(False).astype(bool)]
    position = {str(i): k for k, i in enumerate(feature_ids)}
    ids = [str(i) for i in df["id"]]
    have = np.array([i in position for i in ids], dtype=bool)
    df, ids = df[have], [i for i, h in zip(ids, have, strict=True) if h]
    if len(df) == 0:
        raise ValueError("labels: no labeled row matches a feature id; check that the pool ids match the cache ids")
    y = df["label"].astype(float).to_numpy()
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError(f"label: values must be 0, 1 or null, got {sorted(set(y.tolist()) - {0.0, 1.0})[:5]}")
    solve = df["solve_count"].astype(float).to_numpy() if "solve_count" in df.columns else np.full(len(df), np.nan)
    groups = df["group"].astype(str).to_numpy() if "group" in df.columns else None
    return LabeledRows(
        rows=np.array([position[i] for i in ids], dtype=np.int64),
        labels=torch.tensor(y, dtype=torch.float32),
        solve_counts=torch.tensor(solve, dtype=torch.float32),
        groups=groups,
        ids=ids,
    )
