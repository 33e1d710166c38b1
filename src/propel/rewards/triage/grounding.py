"""Citation grounding: cite the retrieved articles that resolve the ticket, and nothing else."""

from __future__ import annotations

from typing import Any

from propel.rewards.triage.component import TriageReward
from propel.tasks.triage.parse import Submission


class CitationGrounding(TriageReward):
    """Range [0, 1]: the F1 of the cited ids against the gold ids. Ids are compared case-insensitively and counted
    once (thirty copies of one id are one citation: repeating earns nothing here, and costs in the repetition
    penalty); an id that is not among the retrieved articles is invalid: it counts as a wrong citation (it lowers
    precision) and never as a hit. A ticket with no gold article pays 1 for citing nothing and 0 otherwise."""

    def __init__(self, name: str = "grounding", weight: float = 1.0) -> None:
        self.name, self.weight = name, weight

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        cited = list(dict.fromkeys(c.upper() for c in answer.citations))
        context = {a.upper() for a in gold["article_ids"]}
        wanted = {g.upper() for g in gold["gold_ids"]}
        invalid = [c for c in cited if c not in context]
        hits = sum(c in wanted for c in cited)
        details = {"cited": cited, "invalid_citations": invalid}
        if not wanted:
            return float(not cited), details
        if not cited:
            return 0.0, details
        precision, recall = hits / len(cited), hits / len(wanted)
        value = 0.0 if hits == 0 else 2 * precision * recall / (precision + recall)
        return value, details
