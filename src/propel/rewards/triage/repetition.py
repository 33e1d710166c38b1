"""Repetition penalty: loops, long spans copied from the prompt, and repeated citations."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from propel.errors import ConfigError
from propel.rewards.triage.clauses import clauses, instruction
from propel.rewards.triage.copying import copied_words
from propel.rewards.triage.gate import StyleReward
from propel.rewards.triage.mode import CONTENT_FIRST, check_mode
from propel.rewards.triage.normalize import normalize, readable, words
from propel.tasks.triage.parse import Submission


def loop_fraction(tokens: list[str], n: int) -> float:
    """Share of the ``n``-grams that repeat an earlier one (0 for text without loops, towards 1 for a loop)."""
    grams = [tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)]
    return 1.0 - len(set(grams)) / len(grams) if grams else 0.0


def worst_reading(measure: Callable[[str], float], text: str) -> float:
    """``measure`` of ``readable(text)`` normalised both ways (invisible characters removed, or read as spaces), the
    larger: neither a JSON escape nor an invisible character can hide a loop or a copy."""
    text = readable(text)
    return max(measure(normalize(text, invisible)) for invisible in ("", " "))


def clause_words(text: str) -> list[list[str]]:
    """The words of each clause of ``text`` (``clauses.py``): how the copy check reads a completion and its source,
    the way the content check reads a resolution."""
    return [words(c) for c in clauses(text)]


def copied(text: str, source: list[list[str]]) -> int:
    """``copying.copied_words`` of ``text`` (normalised) against the ``source`` clauses' words."""
    parts = clauses(text)
    return copied_words([words(c) for c in parts], [instruction(c) for c in parts], source)


def _clip(x: float) -> float:
    return min(1.0, max(0.0, x))


class RepetitionPenalty(StyleReward):
    """Range [0, 1], 1 = clean: ``(1 - max(loop, copy, duplicates)) * procedure``, each part in [0, 1], the text
    normalised first (NFKC, invisible characters: ``normalize.py``) and gated by content (``gate.py``).

    - ``loop``: the share of repeated word ``n``-grams in the completion beyond ``loop_tolerance``, rescaled
      (``(share - tol) / (1 - tol)``, clipped).
    - ``copy``: the words copied from the ticket and the retrieved articles (``copying.copied_words``: the source
      clauses quoted, in any order, or the longest span copied in order within one instruction or one run of prose,
      the larger; junk words inserted into a copy break nothing): free up to ``copy_span`` words, rising linearly
      to 1 at twice that (quoting a runbook step is fine; pasting the ticket or a whole article back, its steps in
      order or not, is padding).
    - ``duplicates``: the share of citations that repeat an earlier one (thirty copies of an id: 29/30).

    Args:
        n: n-gram order of the loop check.
        loop_tolerance: share of repeated n-grams that costs nothing.
        copy_span: longest free copied span, in words.
        mode: ``content_first`` (gated by content) or ``independent`` (``1 - max(loop, copy, duplicates)`` alone, the
            seed's; ``mode.py``). Both values are logged (``repetition``, ``repetition_raw``).
    """

    def __init__(
        self,
        name: str = "repetition",
        weight: float = 1.0,
        n: int = 4,
        loop_tolerance: float = 0.1,
        copy_span: int = 15,
        mode: str = CONTENT_FIRST,
    ) -> None:
        if n < 1 or not 0.0 <= loop_tolerance < 1.0 or copy_span < 1:
            raise ConfigError(
                f"repetition needs n >= 1, 0 <= loop_tolerance < 1, copy_span >= 1; got {n}, "
                f"{loop_tolerance}, {copy_span}"
            )
        self.name, self.weight, self.mode = name, weight, check_mode(mode, "RepetitionPenalty")
        self.n, self.loop_tolerance, self.copy_span = n, loop_tolerance, copy_span

    def copied(self, completion: str, gold: dict[str, Any]) -> int:
        """Words copied from the ticket and the retrieved articles (``copying.copied_words``, either reading)."""
        source = clause_words(gold["ticket"] + "\n" + gold.get("articles_text", ""))
        return int(worst_reading(lambda t: copied(t, source), completion))

    def style(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        loop = worst_reading(lambda t: loop_fraction(words(t), self.n), completion)
        copied = self.copied(completion, gold)
        cited = [c.upper() for c in answer.citations]
        parts = {
            "loop": _clip((loop - self.loop_tolerance) / (1.0 - self.loop_tolerance)),
            "copy": _clip((copied - self.copy_span) / self.copy_span),
            "duplicates": 1.0 - len(set(cited)) / len(cited) if cited else 0.0,
        }
        return 1.0 - max(parts.values()), {"repetition_parts": parts, "copied_words": copied}
