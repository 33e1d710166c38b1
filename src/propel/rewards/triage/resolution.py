"""Resolution quality: ROUGE-L of the answer's resolution against the ticket's gold resolution."""

from __future__ import annotations

from typing import Any

from propel.domains.triage.parse import Submission
from propel.rewards.triage.base import TriageReward, rouge_l


class TriageResolution(TriageReward):
    """Range [0, 1]: the ROUGE-L F-measure (``rouge-score``, stemmed) of the submitted resolution against the gold
    one; 0 without a submission or with an empty resolution. This is the knowledge term: it rises only when the
    model writes the right fix, not when it changes how it answers."""

    def __init__(self, name: str = "resolution", weight: float = 1.0) -> None:
        self.name, self.weight = name, weight

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        return rouge_l(answer.resolution, gold["gold_resolution"]), {}
