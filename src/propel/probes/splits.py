"""Train/val/test splits and class balancing for probe training (scikit-learn splitters, index arrays out).

Random 80/10/10 (stratified by label) for single-domain pools; stratified k-fold for small pools (every row is held
out once, so a pool with a dozen positives still gets a usable estimate); k-fold by group (e.g. repository) for SWE.
In both k-fold modes fold ``k`` is the test set, fold ``k+1`` the validation set (early stopping) and the rest the
training set (``make_split``). The sweep instead keeps one outer test fold out of every run and rotates validation
over the other folds (``outer_split``), so the rows that select a probe never grade it.

Every split must hold both classes: a one-class train, validation or test set raises (a probe exported from it would
carry an undefined AUROC and a balanced accuracy a constant predictor can reach).
"""

from __future__ import annotations

import warnings

import numpy as np

from propel.errors import ConfigError

SPLITS = ("random", "stratified_kfold", "group_kfold")
BALANCES = ("downsample", "weighted", "none")
RANDOM_MIN_ROWS = 10
"""The fewest labeled rows a random train/validation/test split takes."""


def random_split(
    labels: np.ndarray, fractions: tuple[float, float, float] = (0.8, 0.1, 0.1), seed: int = 0, stratify: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Indices ``(train, val, test)``; stratified by label unless a class is too small to split."""
    from sklearn.model_selection import train_test_split

    labels = np.asarray(labels)
    if len(fractions) != 3 or abs(sum(fractions) - 1.0) > 1e-6 or min(fractions) <= 0:
        raise ValueError(f"fractions: need three positive numbers summing to 1 (train, val, test), got {fractions}")
    idx = np.arange(len(labels))
    if len(idx) < RANDOM_MIN_ROWS:
        raise ValueError(
            f"labels: need at least {RANDOM_MIN_ROWS} labeled rows for a train/val/test split, got {len(idx)}"
        )
    strat = labels if stratify and np.bincount(labels.astype(int)).min(initial=len(labels)) >= 3 else None
    if stratify and strat is None:
        warnings.warn("random_split: a class has < 3 rows; splitting without stratification", stacklevel=2)
    rest_frac = fractions[1] + fractions[2]
    train, rest = train_test_split(idx, test_size=rest_frac, random_state=seed, stratify=strat)
    strat_rest = labels[rest] if strat is not None and np.bincount(labels[rest].astype(int)).min() >= 2 else None
    val, test = train_test_split(rest, test_size=fractions[2] / rest_frac, random_state=seed, stratify=strat_rest)
    return np.sort(train), np.sort(val), np.sort(test)


def _rotate(folds: list[np.ndarray], n: int, fold: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(train, val, test)`` from k disjoint folds: test = fold ``fold``, val = the next one, train = the rest."""
    test, val = folds[fold], folds[(fold + 1) % len(folds)]
    train = np.setdiff1d(np.arange(n), np.concatenate([test, val]))
    return np.sort(train), np.sort(val), np.sort(test)


def _check_folds(n_folds: int, fold: int) -> None:
    if n_folds < 3:
        raise ValueError(f"n_folds must be >= 3 (train, val and test folds), got {n_folds}")
    if not 0 <= fold < n_folds:
        raise ValueError(f"fold must be in 0..{n_folds - 1}, got {fold}")


def fold_shortage(labels, groups=None, *, split: str, n_folds: int) -> str | None:
    """Why ``split`` cannot make ``n_folds`` folds of these rows, or None when it can: stratified folds need
    ``n_folds`` rows of each class, group folds ``n_folds`` distinct groups, a random split 10 rows and 3 of each
    class (one for each of train, validation and test). Asked before a sweep, so that a pool too small to validate a
    probe is answered in words, not a traceback."""
    smallest = int(np.bincount(np.asarray(labels).astype(int), minlength=2).min()) if labels is not None else None
    if split == "random" and (len(labels) < RANDOM_MIN_ROWS or smallest < 3):
        return (
            f"labels: split=random needs >= {RANDOM_MIN_ROWS} rows and >= 3 of each class, got {len(labels)} rows and "
            f"{smallest} in the smaller class; label more tasks"
        )
    if split == "stratified_kfold" and smallest < n_folds:
        return (
            f"labels: split=stratified_kfold needs >= n_folds={n_folds} rows of each class, the smaller class has "
            f"{smallest}; lower n_folds or label more tasks"
        )
    if split == "group_kfold" and groups is not None:
        n_groups = len(np.unique(np.asarray(groups)))
        if n_groups < n_folds:
            return f"group: {n_groups} distinct groups cannot fill n_folds={n_folds}; lower n_folds"
    return None


def _group_folds(groups, n_folds: int) -> list[np.ndarray]:
    from sklearn.model_selection import GroupKFold

    groups = np.asarray(groups)
    short = fold_shortage(None, groups, split="group_kfold", n_folds=n_folds)
    if short:
        raise ValueError(short)
    return [test for _, test in GroupKFold(n_splits=n_folds).split(np.zeros(len(groups)), groups=groups)]


def _stratified_folds(labels, n_folds: int, seed: int) -> list[np.ndarray]:
    from sklearn.model_selection import StratifiedKFold

    y = np.asarray(labels).astype(int)
    short = fold_shortage(y, split="stratified_kfold", n_folds=n_folds)
    if short:
        raise ValueError(short)
    splitter = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return [test for _, test in splitter.split(np.zeros(len(y)), y)]


def group_kfold_split(groups, n_folds: int = 5, fold: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Group-disjoint ``(train, val, test)``: test = fold ``fold``, val = fold ``fold + 1``, train = the rest."""
    _check_folds(n_folds, fold)
    return _rotate(_group_folds(groups, n_folds), len(groups), fold)


def stratified_kfold_split(
    labels, n_folds: int = 5, fold: int = 0, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Label-stratified ``(train, val, test)`` (shuffled with ``seed``): test = fold ``fold``, val = the next fold."""
    _check_folds(n_folds, fold)
    return _rotate(_stratified_folds(labels, n_folds, seed), len(labels), fold)


def outer_split(
    labels, groups=None, *, split: str, seed: int = 0, n_folds: int = 5, test_fold: int = 0, inner: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nested k-fold ``(train, val, test)``: test = fold ``test_fold`` in every run (never seen by selection), val =
    the ``inner``-th of the other folds, train = the remaining ones; ``inner`` runs over ``0..n_folds - 2``."""
    _check_folds(n_folds, test_fold)
    if not 0 <= inner < n_folds - 1:
        raise ValueError(f"inner must be in 0..{n_folds - 2}, got {inner}")
    if split == "stratified_kfold":
        folds = _stratified_folds(labels, n_folds, seed)
    elif split == "group_kfold":
        if groups is None:
            raise ValueError("split=group_kfold needs a `group` column in the labels")
        folds = _group_folds(groups, n_folds)
    else:
        raise ValueError(f"split: outer_split takes stratified_kfold or group_kfold, got {split!r}")
    rest = [f for k, f in enumerate(folds) if k != test_fold]
    val = rest[inner]
    train = np.concatenate([f for k, f in enumerate(rest) if k != inner])
    out = np.sort(train), np.sort(val), np.sort(folds[test_fold])
    check_classes(labels, out)
    return out


def check_classes(labels, split: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """Refuse a split whose train, validation or test set lacks a class (one line naming the set and the fix)."""
    y = np.asarray(labels).astype(int)
    for name, idx in zip(("train", "validation", "test"), split, strict=True):
        present = np.unique(y[np.asarray(idx, dtype=np.int64)])
        if len(present) < 2:
            only = f"only label {int(present[0])}" if len(present) else "no rows"
            raise ConfigError(
                f"labels: the {name} split has {only} ({len(idx)} rows); a probe cannot be trained or graded on one "
                "class: label more tasks, widen the band, or use split=stratified_kfold with fewer folds"
            )


def downsample(indices: np.ndarray, labels: np.ndarray, seed: int = 0) -> np.ndarray:
    """Subset of ``indices`` with equal class counts (the majority class randomly downsampled)."""
    indices = np.asarray(indices)
    y = np.asarray(labels)[indices]
    pos, neg = indices[y == 1], indices[y == 0]
    if len(pos) == 0 or len(neg) == 0:
        raise ValueError("balance=downsample: the training split has only one class; add data or use balance=none")
    n = min(len(pos), len(neg))
    rng = np.random.default_rng(seed)
    keep = np.concatenate([rng.choice(pos, n, replace=False), rng.choice(neg, n, replace=False)])
    return np.sort(keep)


def positive_weight(labels: np.ndarray) -> float:
    """``n_negative / n_positive``: the BCE ``pos_weight`` that balances the two classes."""
    y = np.asarray(labels)
    n_pos = int((y == 1).sum())
    if n_pos == 0:
        raise ValueError("balance=weighted: the training split has no positive rows")
    return float((y == 0).sum()) / n_pos


def make_split(
    labels: np.ndarray,
    groups=None,
    *,
    split: str = "random",
    seed: int = 0,
    n_folds: int = 5,
    fold: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Dispatch on ``split`` (``random``, ``stratified_kfold`` or ``group_kfold``); refuses one-class sets."""
    if split == "random":
        out = random_split(labels, seed=seed)
    elif split == "stratified_kfold":
        out = stratified_kfold_split(labels, n_folds=n_folds, fold=fold, seed=seed)
    elif split == "group_kfold":
        if groups is None:
            raise ValueError("split=group_kfold needs a `group` column in the labels")
        out = group_kfold_split(groups, n_folds=n_folds, fold=fold)
    else:
        raise ValueError(f"split: unknown {split!r}; choose from {', '.join(SPLITS)}")
    check_classes(labels, out)
    return out
