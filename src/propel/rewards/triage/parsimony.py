"""Parsimony: full credit within a length budget tied to the ticket, less for every word beyond it; never more."""

from __future__ import annotations

from typing import Any

from propel.errors import ConfigError
from propel.rewards.triage.gate import StyleReward
from propel.rewards.triage.mode import CONTENT_FIRST, check_mode
from propel.rewards.triage.normalize import word_count
from propel.tasks.triage.parse import Submission


def parsimony(length: int, budget: float, tail: float) -> float:
    """1 up to ``budget`` words, then falling linearly to 0 at ``budget * (1 + tail)``: monotone non-increasing in
    ``length`` and bounded in [0, 1] (no second lobe for long answers: a U-shaped reward that pays long filler, the
    triage write-up's bug, is impossible)."""
    if length <= budget:
        return 1.0
    return max(0.0, 1.0 - (length - budget) / (tail * budget))


class Parsimony(StyleReward):
    """Range [0, 1]: ``parsimony(words in the whole completion, budget, tail) * procedure`` with ``budget =
    max(min_words, ratio * words in the ticket)``. The whole completion counts (filler before the JSON is still
    filler), after normalisation with invisible characters read as spaces (``normalize.word_count``: words joined by
    zero-width spaces count one by one). Gated by content (``gate.py``): a short stub with no right fix earns 0.

    Args:
        ratio: budget per word of the ticket (subject and body).
        min_words: the smallest budget (room for the JSON fields on very short tickets).
        tail: how far past the budget (as a fraction of it) the reward reaches 0.
        mode: ``content_first`` (gated by content) or ``independent`` (``parsimony(...)`` alone, the seed's measure
            without its second lobe; ``mode.py``). Both values are logged (``parsimony``, ``parsimony_raw``).
    """

    def __init__(
        self,
        name: str = "parsimony",
        weight: float = 1.0,
        ratio: float = 2.0,
        min_words: int = 40,
        tail: float = 1.0,
        mode: str = CONTENT_FIRST,
    ) -> None:
        if ratio <= 0 or min_words < 1 or tail <= 0:
            raise ConfigError(f"parsimony needs ratio > 0, min_words >= 1, tail > 0; got {ratio}, {min_words}, {tail}")
        self.name, self.weight, self.mode = name, weight, check_mode(mode, "Parsimony")
        self.ratio, self.min_words, self.tail = ratio, min_words, tail

    def budget(self, ticket: str) -> float:
        return max(float(self.min_words), self.ratio * word_count(ticket))

    def style(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        length, budget = word_count(completion), self.budget(gold["ticket"])
        return parsimony(length, budget, self.tail), {"words": length, "budget": budget}
