"""Resolution quality: does the answer's resolution carry the right fix (``steps.py``)? The knowledge term."""

from __future__ import annotations

from typing import Any

from propel.rewards.triage.component import TriageReward, content, rouge_l
from propel.tasks.triage.parse import Submission


class TriageResolution(TriageReward):
    """Range [0, 1]: the resolution's content (``steps.check_steps``): the share of the gold runbook's steps it
    states in place (as instructions, in the runbook's order, nowhere out of it), less one step for every clause that
    states a step out of order and every distractor article's step it follows, halved for a wrong escalate flag. It
    rises only when the model writes the right fix, not when it changes how it answers. ROUGE-L against the reference
    resolution is logged (``rouge_l``) as a diagnostic and pays nothing: a similarity to one reference text is not a
    right fix (a wrong runbook's steps in the reference's phrasing scored well, the right steps in other words
    poorly)."""

    def __init__(self, name: str = "resolution", weight: float = 1.0) -> None:
        self.name, self.weight = name, weight

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        check = content(answer, gold)
        return check.content, {
            "steps": f"{len(check.matched)}/{len(check.matched) + len(check.missed)}",
            "missed_steps": list(check.missed),
            "unordered_steps": list(check.unordered),
            "wrong_steps": list(check.wrong),
            "escalate_right": check.escalate_right,
            "rouge_l": rouge_l(answer.resolution, gold["gold_resolution"]),
        }
