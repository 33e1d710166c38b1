"""Citation grounding: cite the retrieved articles that resolve the ticket, and nothing else."""

from __future__ import annotations

from typing import Any

import torch

from propel.rewards.triage.component import TriageReward
from propel.rewards.triage.mode import CONTENT_FIRST, check_mode, column
from propel.tasks.triage.parse import Submission


def f1(cited: list[str], wanted: set[str]) -> float:
    """F1 of the distinct ``cited`` ids against ``wanted``; with nothing wanted, 1 for citing nothing, else 0."""
    if not wanted:
        return float(not cited)
    hits = sum(c in wanted for c in cited)
    if hits == 0:
        return 0.0
    precision, recall = hits / len(cited), hits / len(wanted)
    return 2 * precision * recall / (precision + recall)


class CitationGrounding(TriageReward):
    """Range [0, 1]: the F1 of the cited ids against the gold ids. Ids are compared case-insensitively and counted
    once (thirty copies of one id are one citation: repeating earns nothing here, and costs in the repetition
    penalty); an id that is not among the retrieved articles is invalid: it counts as a wrong citation (it lowers
    precision) and never as a hit. A ticket with no gold article pays 1 for citing nothing and 0 otherwise. The same
    in both modes (``mode.py``).

    The paid F1 mixes two failures; both are logged apart every step (paid by neither mode):
    ``reward/grounding/invented_id_rate``, the share of the batch's distinct cited ids that are not among the retrieved
    articles (invented ids; 0 when nothing is cited), and ``reward/grounding_gold_f1``, the F1 against the gold ids of
    the cited ids that *are* among the retrieved articles (picking the right article from those retrieved).
    """

    def __init__(self, name: str = "grounding", weight: float = 1.0, mode: str = CONTENT_FIRST) -> None:
        self.name, self.weight, self.mode = name, weight, check_mode(mode, "CitationGrounding")

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        cited = list(dict.fromkeys(c.upper() for c in answer.citations))
        context = {a.upper() for a in gold["article_ids"]}
        wanted = {g.upper() for g in gold["gold_ids"]}
        invalid = [c for c in cited if c not in context]
        retrieved = [c for c in cited if c in context]
        details = {"cited": cited, "invalid_citations": invalid, "gold_f1": f1(retrieved, wanted)}
        return f1(cited, wanted), details

    def logged_values(self) -> dict[str, torch.Tensor]:
        """``gold_f1`` of each sample of the last call (0 for a rejected answer)."""
        return {"gold_f1": column(self.scored, "gold_f1")}

    def step_stats(self) -> dict[str, float]:
        """``invented_id_rate``: invented ids over distinct cited ids, pooled over the last call's accepted answers."""
        scored = [d for d in self.scored if d is not None]
        cited = sum(len(d["cited"]) for d in scored)
        invented = sum(len(d["invalid_citations"]) for d in scored)
        return {"invented_id_rate": invented / cited if cited else 0.0}
