"""ECE and reliability bins vs torchmetrics; binary probe metrics vs scikit-learn and scipy."""

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from sklearn.metrics import balanced_accuracy_score, f1_score, roc_auc_score
from torchmetrics.classification import BinaryCalibrationError

from propel.metrics.calibration import calibrated_ece, expected_calibration_error, reliability_bins
from propel.metrics.classification import binary_metrics


def sample(n=400, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = (torch.rand(n, generator=g) < 0.3).long()
    logits = 1.5 * (y.float() - 0.4) + torch.randn(n, generator=g)
    return logits, y


@pytest.mark.parametrize("n_bins", [1, 10, 15])
@pytest.mark.parametrize("seed", [0, 1])
def test_ece_matches_torchmetrics(n_bins, seed):
    logits, y = sample(seed=seed)
    probs = torch.sigmoid(logits)
    probs[:3] = torch.tensor([0.0, 1.0, 0.5])  # edges land in the same bins as torchmetrics
    want = BinaryCalibrationError(n_bins=n_bins, norm="l1")(probs, y)
    assert expected_calibration_error(probs, y, n_bins) == pytest.approx(float(want), abs=1e-6)


def test_reliability_bins_counts_and_rates():
    probs = torch.tensor([0.05, 0.1, 0.15, 0.95, 0.9])
    y = torch.tensor([0, 0, 1, 1, 1])
    bins = reliability_bins(probs, y, n_bins=2)
    assert bins.count.tolist() == [3.0, 2.0, 0.0]
    torch.testing.assert_close(bins.accuracy[:2], torch.tensor([1 / 3, 1.0]))
    torch.testing.assert_close(bins.confidence[:2], torch.tensor([0.1, 0.925]))


def test_calibration_refuses_logits():
    with pytest.raises(ValueError, match="sigmoid"):
        expected_calibration_error(torch.tensor([-2.0, 3.0]), torch.tensor([0, 1]))


@pytest.mark.parametrize("threshold", [0.5, 0.3])
def test_binary_metrics_match_sklearn(threshold):
    logits, y = sample(seed=3)
    solve = torch.randint(0, 9, (len(y),), generator=torch.Generator().manual_seed(1)).float() + y
    m = binary_metrics(logits, y, solve, threshold=threshold)
    probs = torch.sigmoid(logits).numpy()
    preds = (probs >= threshold).astype(int)
    assert m["accuracy"] == pytest.approx(float((preds == y.numpy()).mean()), abs=1e-6)
    assert m["balanced_accuracy"] == pytest.approx(balanced_accuracy_score(y.numpy(), preds), abs=1e-6)
    assert m["f1"] == pytest.approx(f1_score(y.numpy(), preds), abs=1e-6)
    assert m["auroc"] == pytest.approx(roc_auc_score(y.numpy(), probs), abs=1e-5)
    assert m["ece"] == pytest.approx(expected_calibration_error(torch.sigmoid(logits), y), abs=1e-6)
    assert m["spearman"] == pytest.approx(spearmanr(logits.numpy(), solve.numpy()).statistic, abs=1e-4)


def test_binary_metrics_one_class_is_nan_not_crash():
    m = binary_metrics(torch.tensor([0.3, -1.0, 2.0]), torch.tensor([1, 1, 1]))
    assert np.isnan(m["auroc"]) and np.isnan(m["spearman"])
    assert np.isnan(m["balanced_accuracy"])  # one class: undefined, see test_classification.py


def test_calibrated_ece_is_the_mean_ece_of_labels_drawn_from_the_probabilities():
    """Against torchmetrics on the same seeded draws; large on few rows with spread probabilities (the sampling
    noise a calibration limit must not mistake for miscalibration), small on many."""
    probs = torch.rand(32, generator=torch.Generator().manual_seed(3)) * 0.85 + 0.05
    labels = (torch.rand(64, 32, generator=torch.Generator().manual_seed(0)) < probs).long()
    reference = np.mean([float(BinaryCalibrationError(n_bins=15)(probs, y)) for y in labels])
    assert calibrated_ece(probs, draws=64, seed=0) == pytest.approx(reference, abs=1e-6)
    assert calibrated_ece(probs) > 0.15
    many = torch.rand(8192, generator=torch.Generator().manual_seed(4)) * 0.85 + 0.05
    assert calibrated_ece(many, draws=32) < 0.03
    with pytest.raises(ValueError, match="draws must be >= 1"):
        calibrated_ece(probs, draws=0)
