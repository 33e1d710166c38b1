"""Calibration: the stated confidence should match whether the answer is a right fix (a Brier score)."""

from __future__ import annotations

from typing import Any

import torch
from torchmetrics.functional.classification import binary_auroc

from propel.errors import ConfigError
from propel.rewards.triage.component import TriageReward, content
from propel.rewards.triage.mode import CONTENT_FIRST, check_mode
from propel.rewards.triage.steps import RIGHT_FIX
from propel.tasks.triage.parse import Submission


class TriageCalibration(TriageReward):
    """Range [0, 1]: ``1 - (confidence - correct)^2``. ``correct`` is 1 when the resolution is a right fix
    (``steps.StepCheck.right_fix``): it follows no wrong step (none out of the runbook's order, no distractor's), its
    content (gold steps stated in place) reaches ``threshold``, *and* the escalate flag equals the gold one; else 0.
    A missing or invalid confidence (not a number in [0, 1]) scores 0, the worst Brier outcome. Confident-wrong
    (0.95, wrong) earns 0.0975, hedged-wrong (0.1, wrong) 0.99: the model is paid for knowing when it does not know,
    so this component is not gated by content (scaled by content, the Brier score would no longer be proper: the best
    confidence would rise above the chance of a right fix).

    The same in both modes (``mode.py``). A Brier score mixes calibration with discrimination; every step logs the
    discrimination apart (paid by neither mode): ``reward/calibration/auroc``, the area under the ROC curve of the
    stated confidence against ``correct`` over the batch's accepted answers with a valid confidence (torchmetrics'
    ``binary_auroc``, scikit-learn's ``roc_auc_score``: 0.5 for a confidence that does not tell right fixes from
    wrong ones, 1 for one that ranks every right fix above every wrong one; not logged on a step where those answers
    are all right or all wrong, where it is undefined), beside ``reward/calibration/one_minus_brier``, the mean ``1 -
    Brier`` over the same answers.

    Args:
        threshold: the procedure value (``StepCheck.procedure``) at or above which a resolution (with the right flag)
            counts as a right fix.
        mode: ``content_first`` or ``independent``: both pay the same.
    """

    def __init__(
        self, name: str = "calibration", weight: float = 1.0, threshold: float = RIGHT_FIX, mode: str = CONTENT_FIRST
    ) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ConfigError(f"calibration threshold must be in (0, 1], got {threshold}")
        self.name, self.weight, self.threshold = name, weight, threshold
        self.mode = check_mode(mode, "TriageCalibration")

    def correct(self, answer: Submission, gold: dict[str, Any]) -> bool:
        return content(answer, gold).right_fix(self.threshold)

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        correct = self.correct(answer, gold)
        confidence = answer.confidence
        value = 0.0 if confidence is None else 1.0 - (confidence - float(correct)) ** 2
        return value, {"correct": correct, "confidence": confidence}

    def step_stats(self) -> dict[str, float]:
        """``auroc`` (when both right and wrong fixes are among the answers with a confidence) and
        ``one_minus_brier`` over the last call's accepted answers with a valid confidence."""
        rated = [d for d in self.scored if d is not None and d["confidence"] is not None]
        if not rated:
            return {}
        confidence = [float(d["confidence"]) for d in rated]
        correct = [int(d["correct"]) for d in rated]
        brier = sum((c - y) ** 2 for c, y in zip(confidence, correct, strict=True)) / len(rated)
        stats = {"one_minus_brier": 1.0 - brier}
        if 0 < sum(correct) < len(correct):
            stats["auroc"] = float(binary_auroc(torch.tensor(confidence), torch.tensor(correct)))
        return stats
