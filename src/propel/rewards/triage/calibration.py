"""Calibration: the stated confidence should match whether the answer is a right fix (a Brier score)."""

from __future__ import annotations

from typing import Any

from propel.errors import ConfigError
from propel.rewards.triage.component import TriageReward, content
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

    Args:
        threshold: the procedure value (``StepCheck.procedure``) at or above which a resolution (with the right flag)
            counts as a right fix.
    """

    def __init__(self, name: str = "calibration", weight: float = 1.0, threshold: float = RIGHT_FIX) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ConfigError(f"calibration threshold must be in (0, 1], got {threshold}")
        self.name, self.weight, self.threshold = name, weight, threshold

    def correct(self, answer: Submission, gold: dict[str, Any]) -> bool:
        return content(answer, gold).right_fix(self.threshold)

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        correct = self.correct(answer, gold)
        confidence = answer.confidence
        value = 0.0 if confidence is None else 1.0 - (confidence - float(correct)) ** 2
        return value, {"correct": correct}
