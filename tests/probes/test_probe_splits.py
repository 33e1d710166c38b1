"""Splits that lack a class are refused with one line, in the sweep, the DataModule and the nested k-fold split."""

import numpy as np
import pandas as pd
import pytest
import torch

from propel.errors import ConfigError
from propel.probes.data import align_labels
from propel.probes.splits import check_classes, make_split, outer_split
from propel.probes.sweep import run_sweep
from propel.probes.sweep_spec import SweepSpec
from propel.probes.training import LoopSpec


def rare_labels(n=100, positives=2):
    y = np.zeros(n, dtype=int)
    y[:positives] = 1
    return y


def test_random_split_without_positives_in_val_or_test_is_refused():
    with pytest.warns(UserWarning, match="stratification"), pytest.raises(ConfigError) as err:
        make_split(rare_labels(), split="random", seed=0)
    msg = str(err.value)
    assert "\n" not in msg and "only label 0" in msg and ("validation" in msg or "test" in msg)


def test_check_classes_names_the_set():
    y = np.array([0, 1, 0, 1, 0, 0])
    check_classes(y, (np.array([0, 1]), np.array([2, 3]), np.array([0, 3])))
    with pytest.raises(ConfigError, match="the train split has only label 0"):
        check_classes(y, (np.array([0, 2]), np.array([2, 3]), np.array([0, 3])))


def test_outer_split_refuses_one_class_groups():
    y = np.array([1] * 12 + [0] * 48)
    groups = np.array([f"g{i // 12}" for i in range(60)])  # group g0 holds every positive
    with pytest.raises(ConfigError, match="only label 0"):
        outer_split(y, groups, split="group_kfold", n_folds=5, test_fold=1)


def test_sweep_with_balance_none_refuses_a_one_class_split():
    """Before: balance=none exported a probe with AUROC NaN and no warning."""
    n = 60
    ids = [f"t{i}" for i in range(n)]
    pool = pd.DataFrame({"id": ids, "label": rare_labels(n, positives=2)})
    rows = align_labels(ids, pool)
    features = {"layer1/mean_full": torch.randn(n, 4)}
    config = SweepSpec(archs=("linear",), balances=("none",), seeds=(0,), loop=LoopSpec(max_epochs=2))
    with pytest.warns(UserWarning), pytest.raises(ConfigError, match="one class"):
        run_sweep(features, rows, config, progress=False)


def test_datamodule_refuses_a_one_class_split(tmp_path):
    from propel.datamodules.activations import ActivationDataModule
    from propel.probes.cache import save_features_file

    n = 60
    ids = [f"t{i}" for i in range(n)]
    feats = save_features_file(tmp_path / "f.pt", ids, {"layer1/mean_full": torch.randn(n, 4)}, model_id="m")
    pd.DataFrame({"id": ids, "label": rare_labels(n, positives=2)}).to_parquet(tmp_path / "pool.parquet")
    dm = ActivationDataModule(str(feats), str(tmp_path / "pool.parquet"), balance="none")
    with pytest.warns(UserWarning), pytest.raises(ConfigError, match="one class"):
        dm.setup("fit")
