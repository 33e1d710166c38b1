"""Resolution quality: does the answer's resolution carry the right fix (``steps.py``)? The content term (extraction
from the retrieved runbook)."""

from __future__ import annotations

from typing import Any

import torch

from propel.rewards.triage.component import TriageReward, content, rouge_l
from propel.rewards.triage.mode import CONTENT_FIRST, check_mode, column
from propel.tasks.triage.parse import Submission


class TriageResolution(TriageReward):
    """Range [0, 1]: the resolution's content (``steps.check_steps``): the share of the gold runbook's steps it
    states in place (as instructions in any register, doing the step's action with its polarity, in the runbook's
    order, nowhere out of it, not taken back by a later retraction), less one step for every clause that states a step
    out of order, every distractor article's step it follows and every runbook "do not" it says to do, halved for a
    wrong escalate flag. It
    rises only when the model writes the right fix, not when it changes how it answers. ROUGE-L against the reference
    resolution is logged (``rouge_l``) as a diagnostic and pays nothing: a similarity to one reference text is not a
    right fix (a wrong runbook's steps in the reference's phrasing scored well, the right steps in other words
    poorly).

    With ``mode="independent"`` (the seed's, ``mode.py``) it pays that ROUGE-L instead, and the content is logged
    only. Every step logs ``resolution_rouge_l``, ``resolution_content`` and ``resolution_coverage`` (the share of the
    gold steps stated in place, ``StepCheck.coverage``) in both modes.

    Args:
        mode: ``content_first`` (pays the content) or ``independent`` (pays ROUGE-L).
    """

    def __init__(self, name: str = "resolution", weight: float = 1.0, mode: str = CONTENT_FIRST) -> None:
        self.name, self.weight, self.mode = name, weight, check_mode(mode, "TriageResolution")

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        check = content(answer, gold)
        rouge = rouge_l(answer.resolution, gold["gold_resolution"])
        return check.content if self.mode == CONTENT_FIRST else rouge, {
            "steps": f"{len(check.matched)}/{len(check.matched) + len(check.missed)}",
            "missed_steps": list(check.missed),
            "unordered_steps": list(check.unordered),
            "wrong_steps": list(check.wrong),
            "contradicted_steps": list(check.contradicted),
            "retracted_clauses": check.retracted,
            "escalate_right": check.escalate_right,
            "rouge_l": rouge,
            "content": check.content,
            "coverage": check.coverage,
        }

    def logged_values(self) -> dict[str, torch.Tensor]:
        """``rouge_l``, ``content`` and ``coverage`` of each sample of the last call (0 for a rejected answer)."""
        return {key: column(self.scored, key) for key in ("rouge_l", "content", "coverage")}
