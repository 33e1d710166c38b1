"""ActivationDataModule: cached reference-model features joined with task-pool labels, split and balanced."""

from __future__ import annotations

import numpy as np
import torch
from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader, TensorDataset

from propel.pools import read_labels
from propel.probes.cache import load_features
from propel.probes.data import align_labels
from propel.probes.extraction import feature_key
from propel.probes.heads import feature_stats
from propel.probes.splits import BALANCES, downsample, make_split, positive_weight


class ActivationDataModule(LightningDataModule):
    """Features (a cache folder or a ``.pt`` features file) + labels (Parquet pool) -> train/val/test loaders.

    Batches are ``(features [B, D], label [B], solve_count [B])``.

    Args:
        features_path: activation cache folder (from ``extract_to_cache``) or features file (``save_features_file``).
        labels_path: Parquet task pool with ``id``, ``label`` (0/1/null) and optionally ``solve_count``, ``group``,
            ``valid``.
        layer: layer of the feature block to use (with ``pooling``; may be omitted when the source holds one block).
        pooling: pooling of the feature block to use.
        split: ``random`` (stratified 80/10/10), ``stratified_kfold`` (small pools) or ``group_kfold`` (by the
            ``group`` column).
        n_folds: folds for the k-fold splits.
        fold: which fold is the test fold (the next one is validation).
        balance: ``downsample`` the train split to equal classes, ``weighted`` (BCE pos_weight) or ``none``.
        batch_size: training batch size.
        seed: seed for the split and the downsampling.
        num_workers: DataLoader workers (features are in memory: 0 is usually fastest).
    """

    def __init__(
        self,
        features_path: str,
        labels_path: str,
        layer: int | None = None,
        pooling: str | None = None,
        split: str = "random",
        n_folds: int = 5,
        fold: int = 0,
        balance: str = "downsample",
        batch_size: int = 64,
        seed: int = 0,
        num_workers: int = 0,
    ):
        super().__init__()
        if balance not in BALANCES:
            raise ValueError(f"balance: unknown {balance!r}; choose from {', '.join(BALANCES)}")
        if (layer is None) != (pooling is None):
            raise ValueError("layer/pooling: set both (to pick one feature block) or neither")
        self.save_hyperparameters()
        self.feature_dim: int | None = None
        self.feature_mean: torch.Tensor | None = None
        self.feature_std: torch.Tensor | None = None
        self.pos_weight: float | None = None
        self.feature_info: dict = {}
        self._sets: dict[str, TensorDataset] = {}

    def setup(self, stage: str | None = None) -> None:
        if self._sets:
            return
        h = self.hparams
        key = None if h.layer is None else feature_key(h.layer, h.pooling)
        ids, features, info = load_features(h.features_path, key)
        rows = align_labels(ids, read_labels(h.labels_path))
        x = features[torch.as_tensor(rows.rows)]
        y, s = rows.labels, rows.solve_counts
        train, val, test = make_split(
            y.numpy().astype(int), rows.groups, split=h.split, seed=h.seed, n_folds=h.n_folds, fold=h.fold
        )
        if h.balance == "downsample":
            train = downsample(train, y.numpy().astype(int), seed=h.seed)
        elif h.balance == "weighted":
            self.pos_weight = positive_weight(y.numpy()[train])
        self.feature_dim = x.shape[1]
        self.feature_mean, self.feature_std = feature_stats(x[torch.as_tensor(train)])
        layer, pooling = _parse_key(info.get("key"))
        self.feature_info = {
            "reference_model": info.get("model_id", "unknown"),
            "layer": layer,
            "pooling": pooling,
            "trajectory_pooling": info.get("trajectory_pooling", "mean"),
            "max_length": info.get("max_length", 1024),
            "reference": info.get("reference"),
        }
        self.split_sizes = {"train": len(train), "val": len(val), "test": len(test)}
        for name, idx in (("train", train), ("val", val), ("test", test)):
            t = torch.as_tensor(np.asarray(idx), dtype=torch.long)
            self._sets[name] = TensorDataset(x[t], y[t], s[t])
        self._sets["predict"] = TensorDataset(x, y, s)

    def _loader(self, name: str, shuffle: bool = False) -> DataLoader:
        if not self._sets:
            self.setup()
        size = self.hparams.batch_size if name == "train" else 4096
        return DataLoader(self._sets[name], batch_size=size, shuffle=shuffle, num_workers=self.hparams.num_workers)

    def train_dataloader(self) -> DataLoader:
        return self._loader("train", shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._loader("test")

    def predict_dataloader(self) -> DataLoader:
        return self._loader("predict")


def _parse_key(key: str | None) -> tuple[int, str]:
    """``layer12/mean_full`` -> ``(12, "mean_full")``; unknown formats give ``(-1, key)``."""
    if key and key.startswith("layer") and "/" in key:
        layer, pooling = key[len("layer") :].split("/", 1)
        if layer.isdigit():
            return int(layer), pooling
    return -1, key or "unknown"
