"""Repetition penalty: loops, long spans copied from the prompt, and repeated citations."""

from __future__ import annotations

from typing import Any

from propel.domains.triage.parse import Submission
from propel.errors import ConfigError
from propel.rewards.triage.base import TriageReward, words


def loop_fraction(tokens: list[str], n: int) -> float:
    """Share of the ``n``-grams that repeat an earlier one (0 for text without loops, towards 1 for a loop)."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def longest_copy(tokens: list[str], source: list[str], min_span: int) -> int:
    """Length of the longest run of ``tokens`` that appears verbatim in ``source`` (0 when shorter than
    ``min_span``): runs of consecutive ``min_span``-grams found in the source."""
    grams = {tuple(source[i : i + min_span]) for i in range(len(source) - min_span + 1)}
    best = run = 0
    for i in range(len(tokens) - min_span + 1):
        run = run + 1 if tuple(tokens[i : i + min_span]) in grams else 0
        best = max(best, run)
    return best + min_span - 1 if best else 0


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


class RepetitionPenalty(TriageReward):
    """Range [0, 1], 1 = clean: ``1 - max(loop, copy, duplicates)``, each in [0, 1].

    - ``loop``: the share of repeated word ``n``-grams in the completion beyond ``loop_tolerance``, rescaled
      (``(share - tol) / (1 - tol)``, clipped).
    - ``copy``: the longest verbatim word span shared with the ticket and the retrieved articles: free up to
      ``copy_span`` words, rising linearly to 1 at twice that (quoting a runbook step is fine; pasting the ticket or
      a whole article back is padding).
    - ``duplicates``: the share of citations that repeat an earlier one (thirty copies of an id: 29/30).

    Args:
        n: n-gram order of the loop check.
        loop_tolerance: share of repeated n-grams that costs nothing.
        copy_span: longest free verbatim span, in words.
    """

    def __init__(
        self,
        name: str = "repetition",
        weight: float = 1.0,
        n: int = 4,
        loop_tolerance: float = 0.1,
        copy_span: int = 15,
    ) -> None:
        if n < 1 or not 0.0 <= loop_tolerance < 1.0 or copy_span < 1:
            raise ConfigError(
                f"repetition needs n >= 1, 0 <= loop_tolerance < 1, copy_span >= 1; got {n}, "
                f"{loop_tolerance}, {copy_span}"
            )
        self.name, self.weight = name, weight
        self.n, self.loop_tolerance, self.copy_span = n, loop_tolerance, copy_span

    def parts(self, answer: Submission, completion: str, gold: dict[str, Any]) -> dict[str, float]:
        tokens = words(completion)
        loop = (loop_fraction(tokens, self.n) - self.loop_tolerance) / (1.0 - self.loop_tolerance)
        source = words(gold["ticket"]) + words(gold.get("articles_text", ""))
        copied = longest_copy(tokens, source, self.copy_span + 1)
        cited = [c.upper() for c in answer.citations]
        duplicates = 1.0 - len(set(cited)) / len(cited) if cited else 0.0
        copy = (copied - self.copy_span) / self.copy_span
        return {"loop": _clip(loop), "copy": _clip(copy), "duplicates": duplicates}

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        parts = self.parts(answer, completion, gold)
        return 1.0 - max(parts.values()), {"repetition_parts": parts}
