"""ActivationDataModule: join, null-label exclusion, stratified and group splits, balancing, train-split stats."""

import numpy as np
import pytest
import torch

from propel.datamodules.activations import ActivationDataModule
from propel.testing.probe_data import synthetic_probe_data, write_synthetic


@pytest.fixture()
def paths(tmp_path):
    return write_synthetic(tmp_path, n=400)


def test_random_split_downsampled(paths):
    feats, labels = paths
    dm = ActivationDataModule(str(feats), str(labels), layer=1, pooling="mean_full", balance="downsample")
    dm.setup("fit")
    _, _, pool = synthetic_probe_data(n=400)
    usable = pool[pool["label"].notna()]
    sizes = dm.split_sizes
    assert sizes["val"] + sizes["test"] == pytest.approx(0.2 * len(usable), abs=2)
    y_train = torch.cat([b[1] for b in dm.train_dataloader()])
    assert (y_train == 1).sum() == (y_train == 0).sum()  # downsampled to equal classes
    assert dm.feature_dim == 16 and dm.pos_weight is None
    x_train = torch.cat([b[0] for b in dm.train_dataloader()])
    torch.testing.assert_close(dm.feature_mean, x_train.mean(0))
    assert dm.feature_info["layer"] == 1 and dm.feature_info["pooling"] == "mean_full"
    # val/test stratified: the positive rate is close to the pool's
    y_val = torch.cat([b[1] for b in dm.val_dataloader()])
    assert abs(float(y_val.mean()) - float(usable["label"].mean())) < 0.1


def test_group_kfold_weighted(paths):
    feats, labels = paths
    dm = ActivationDataModule(
        str(feats),
        str(labels),
        layer=2,
        pooling="last_token",
        split="group_kfold",
        n_folds=5,
        fold=1,
        balance="weighted",
    )
    dm.setup("fit")
    y = torch.cat([b[1] for b in dm.train_dataloader()])
    assert dm.pos_weight == pytest.approx(float((y == 0).sum() / (y == 1).sum()))
    total = sum(dm.split_sizes.values())
    _, _, pool = synthetic_probe_data(n=400)
    assert total == int(pool["label"].notna().sum())


def test_group_folds_are_group_disjoint():
    from propel.probes.splits import group_kfold_split

    groups = np.array([f"r{i % 7}" for i in range(70)])
    for fold in range(5):
        tr, va, te = group_kfold_split(groups, 5, fold)
        sets = [set(groups[i]) for i in (tr, va, te)]
        assert not (sets[0] & sets[1]) and not (sets[0] & sets[2]) and not (sets[1] & sets[2])
        assert len(tr) + len(va) + len(te) == 70


def test_stratified_folds_hold_every_row_out_once_with_both_classes():
    from sklearn.model_selection import StratifiedKFold

    from propel.probes.splits import stratified_kfold_split

    y = np.array([1] * 12 + [0] * 73)  # the demo's pool shape: few positives
    tests = []
    for fold in range(5):
        tr, va, te = stratified_kfold_split(y, 5, fold, seed=3)
        assert not (set(tr) & set(va)) and not (set(tr) & set(te)) and not (set(va) & set(te))
        assert len(tr) + len(va) + len(te) == len(y) and y[te].sum() >= 2 and y[va].sum() >= 2
        tests.append(te)
    assert sorted(np.concatenate(tests).tolist()) == list(range(len(y)))
    want = [np.sort(t) for _, t in StratifiedKFold(5, shuffle=True, random_state=3).split(np.zeros(len(y)), y)]
    assert all(np.array_equal(a, b) for a, b in zip(tests, want, strict=True))  # scikit-learn's folds, in order
    with pytest.raises(ValueError, match="stratified_kfold needs >= n_folds=5 rows of each class"):
        stratified_kfold_split(np.array([1] * 4 + [0] * 40), 5, 0)


def test_clear_errors(paths, tmp_path):
    feats, labels = paths
    with pytest.raises(ValueError, match="layer and pooling"):
        ActivationDataModule(str(feats), str(labels)).setup("fit")
    with pytest.raises(ValueError, match="balance"):
        ActivationDataModule(str(feats), str(labels), balance="oversample")
    with pytest.raises(FileNotFoundError, match="labels_path"):
        ActivationDataModule(str(feats), str(tmp_path / "nope.parquet"), layer=1, pooling="mean_full").setup()


def test_pool_folder_of_parts(tmp_path):
    """A labeling run's pool folder (part files, a re-written id keeps its first label) reads like one file."""
    from propel.pools import read_labels

    _, _, pool = synthetic_probe_data(n=100)
    (tmp_path / "pool").mkdir()
    pool.iloc[:60].to_parquet(tmp_path / "pool" / "part-00000.parquet")
    dup = pool.iloc[50:].copy()
    dup.loc[dup.index[:10], "label"] = 1 - dup["label"].iloc[:10]
    dup.to_parquet(tmp_path / "pool" / "part-00001.parquet")
    df = read_labels(tmp_path / "pool")
    assert len(df) == 100
    assert df["label"].equals(pool["label"])
