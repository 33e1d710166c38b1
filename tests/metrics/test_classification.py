"""One-class splits: balanced accuracy is undefined there, so a constant predictor cannot score 1.0."""

import math

import torch

from propel.metrics.classification import balanced_accuracy, binary_metrics


def test_constant_predictor_on_one_class_is_not_perfect():
    y = torch.ones(20, dtype=torch.long)
    always_yes = torch.full((20,), 5.0)  # predicts the only class present everywhere
    m = binary_metrics(always_yes, y)
    assert math.isnan(m["balanced_accuracy"]) and math.isnan(m["auroc"])
    assert math.isnan(balanced_accuracy(torch.ones(20, dtype=torch.long), y))


def test_balanced_accuracy_is_the_mean_recall_of_both_classes():
    y = torch.tensor([1, 1, 1, 1, 0, 0])
    preds = torch.tensor([1, 1, 1, 0, 0, 1])
    assert balanced_accuracy(preds, y) == (3 / 4 + 1 / 2) / 2
    assert balanced_accuracy(torch.ones(6, dtype=torch.long), y) == 0.5  # constant predictor: chance
