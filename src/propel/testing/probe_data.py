"""Synthetic probe data for tests: features with a planted linear signal and a matching task pool, written as the
feature file and Parquet pool that probe training reads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from propel.probes.cache import save_features_file


def synthetic_probe_data(
    n: int = 600,
    dim: int = 16,
    keys: tuple[str, ...] = ("layer1/mean_full", "layer2/last_token"),
    signal: tuple[float, ...] = (3.0, 0.0),
    positive_rate: float = 0.3,
    n_groups: int = 10,
    seed: int = 0,
):
    """``(ids, features {key: [n, dim]}, pool DataFrame)``; ``signal[i]`` is how separable ``keys[i]`` is.

    The pool has ``id``, ``label``, ``solve_count`` (0..8, in 1..3 iff positive), ``group`` and ``valid``;
    about 5% of rows are invalid with a null label.
    """
    import pandas as pd

    rng = np.random.default_rng(seed)
    y = (rng.random(n) < positive_rate).astype(float)
    direction = rng.normal(size=dim)
    direction /= np.linalg.norm(direction)
    features = {}
    for key, s in zip(keys, signal, strict=True):
        x = (
            rng.normal(size=(n, dim)) + s * np.outer(y - positive_rate, direction) + 5.0
        )  # offset: tests standardization
        features[key] = torch.tensor(x, dtype=torch.float32)
    solve = np.where(y == 1, rng.integers(1, 4, n), rng.choice([0, 4, 5, 6, 7, 8], n))
    valid = rng.random(n) > 0.05
    label = np.where(valid, y, np.nan)
    ids = [f"t{i:05d}" for i in range(n)]
    pool = pd.DataFrame(
        {
            "id": ids,
            "label": label,
            "solve_count": solve,
            "group": [f"g{i % n_groups}" for i in range(n)],
            "valid": valid,
        }
    )
    return ids, features, pool


def write_synthetic(out_dir: str | Path, **kwargs) -> tuple[Path, Path]:
    """Write a features file and a Parquet pool; returns ``(features_path, labels_path)``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    ids, features, pool = synthetic_probe_data(**kwargs)
    feats = save_features_file(out_dir / "features.pt", ids, features, model_id="synthetic")
    labels = out_dir / "pool.parquet"
    pool.to_parquet(labels)
    return feats, labels


def rvp_features(features: dict[str, Tensor], contexts: int = 4, group_size: int = 4, seed: int = 1):
    """A fake base-policy sample drawn from the same feature distribution: ``(features, valid)``."""
    g = torch.Generator().manual_seed(seed)
    n = contexts * group_size
    out = {k: v[torch.randint(0, len(v), (n,), generator=g)] for k, v in features.items()}
    valid = torch.rand(n, generator=g) > 0.25
    return out, valid
