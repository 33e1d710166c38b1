"""Balanced accuracy of several classifiers on the same held-out rows, with paired bootstrap intervals."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score, roc_auc_score

from propel.metrics.held_out import auroc_interval, balanced_accuracy, compare_on_held_out


def test_balanced_accuracy_matches_scikit_learn_row_by_row():
    rng = np.random.default_rng(0)
    labels = rng.random((50, 30)) < 0.3
    labels[:, 0], labels[:, 1] = True, False  # both classes in every row
    preds = rng.random((50, 30)) < 0.5
    ours = balanced_accuracy(labels, preds)
    for k in range(50):
        assert ours[k] == pytest.approx(balanced_accuracy_score(labels[k], preds[k]))


def test_a_perfect_probe_is_above_chance_and_a_coin_is_not():
    rng = np.random.default_rng(1)
    y = np.array([1] * 11 + [0] * 74, dtype=bool)  # the demo's held-out shape: 11 positives of 85
    coin = rng.random(85) < 0.5
    out = compare_on_held_out(y, {"probe": y.copy(), "coin": coin}, subject="probe")
    assert out["rows"] == {"positives": 11, "negatives": 74}
    assert out["probe"]["balanced_accuracy"] == 1.0 and out["probe"]["vs_chance"]["low"] == 0.5
    chance = out["coin"]["vs_chance"]
    assert chance["low"] < 0 < chance["high"]  # a coin is not distinguishable from chance
    assert out["coin"]["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y, coin))
    assert out["probe"]["vs_coin"]["low"] > 0 and "vs_probe" not in out["coin"]


def test_the_difference_is_paired_so_identical_classifiers_differ_by_exactly_zero():
    rng = np.random.default_rng(2)
    y, p = rng.random(40) < 0.4, rng.random(40) < 0.5
    out = compare_on_held_out(y, {"probe": p, "same": p.copy()}, subject="probe")
    assert out["probe"]["vs_same"] == {"estimate": 0.0, "low": 0.0, "high": 0.0, "confidence": 0.95}
    # an unpaired bootstrap of the same two would give an interval of width > 0
    assert out["probe"]["vs_chance"]["high"] > out["probe"]["vs_chance"]["low"]


def test_bad_inputs_are_refused():
    y = np.array([True, False, True])
    with pytest.raises(ValueError, match="both classes"):
        compare_on_held_out(np.ones(3, dtype=bool), {"probe": y}, subject="probe")
    with pytest.raises(ValueError, match="2 predictions for 3 labels"):
        compare_on_held_out(y, {"probe": y, "short": y[:2]}, subject="probe")
    with pytest.raises(ValueError, match="subject"):
        compare_on_held_out(y, {"probe": y}, subject="nope")


def test_auroc_interval_matches_scikit_learn_and_separates_a_ranking_from_a_coin():
    """The point estimate is scikit-learn's (ties counted half); a score that tracks the label has an interval above
    0.5 on 32 rows, an unrelated one covers 0.5."""
    rng = np.random.default_rng(0)
    labels = np.array([True] * 11 + [False] * 21)
    informative = labels * 1.0 + rng.normal(0, 0.6, 32)
    coin = np.round(rng.normal(0, 1, 32), 1)  # rounded: ties
    for scores in (informative, coin):
        assert auroc_interval(labels, scores)["estimate"] == pytest.approx(roc_auc_score(labels, scores))
    assert auroc_interval(labels, informative)["low"] > 0.5
    coin_interval = auroc_interval(labels, coin)
    assert coin_interval["low"] < 0.5 < coin_interval["high"]
    with pytest.raises(ValueError, match="both classes"):
        auroc_interval([True, True], [0.1, 0.2])
