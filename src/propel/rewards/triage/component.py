"""What the six triage rewards share: the parsed answer, the ticket's gold data, the content verdict, ROUGE-L, and a
per-sample record.

Every component reads ``sample.completion`` (parsed once per text by ``submission``) and the context's gold
``data`` (``propel.tasks.triage.Ticket.grading_data``), and writes its value and details into
``sample.info["triage"]`` so the sample table can show why a sample scored what it did. A rejected answer (no
submission, two, a duplicate or extra key: ``propel.tasks.triage.parse``) scores 0 on every component, and its
``reason`` is recorded by each of them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from propel.records import Sample
from propel.rewards.reward import Reward, gold_data
from propel.rewards.triage.normalize import normalize
from propel.rewards.triage.steps import StepCheck, check_steps
from propel.tasks.triage.parse import Submission, parse_submission
from propel.tasks.triage.prompt import answer_text

INFO_KEY = "triage"
GOLD_KEYS = ("gold_resolution", "gold_ids", "article_ids", "escalate", "ticket", "gold_steps", "distractor_steps")


@functools.lru_cache(maxsize=4096)
def submission(text: str) -> Submission:
    """The parsed answer of a completion (cached: six components read the same text; treat it as read-only)."""
    return parse_submission(text)


def content(answer: Submission, gold: dict[str, Any]) -> StepCheck:
    """The content verdict on the answer's resolution (``steps.py``): its ``procedure`` is what the style components
    are gated by."""
    return check_steps(
        answer.resolution,
        answer.escalate,
        tuple(gold["gold_steps"]),
        tuple(gold["distractor_steps"]),
        bool(gold["escalate"]),
        gold["ticket"],
    )


@functools.lru_cache(maxsize=1)
def _scorer():
    try:
        from rouge_score import rouge_scorer
    except ModuleNotFoundError as e:  # a dependency of propel: only a broken install lands here
        raise ModuleNotFoundError("the triage resolution reward needs rouge-score: pip install rouge-score") from e
    from rouge_score import tokenizers

    return rouge_scorer.RougeScorer(
        ["rougeL"], tokenizer=_CachedTokenizer(tokenizers.DefaultTokenizer(use_stemmer=True))
    )


class _CachedTokenizer:
    """rouge-score's own tokenizer (Porter stemming), remembering recent texts: a ticket's reference is scored against
    every answer of a group, and stemming it again was a third of the triage reward's time. The same tokens."""

    def __init__(self, tokenizer):
        self._tokens = functools.lru_cache(maxsize=4096)(lambda text: tuple(tokenizer.tokenize(text)))

    def tokenize(self, text: str) -> list[str]:
        return list(self._tokens(text))


def rouge_l(prediction: str, reference: str) -> float:
    """ROUGE-L F-measure (``rouge-score``, Porter stemming) of ``prediction`` against ``reference``, in [0, 1]; the
    prediction is normalised first (``normalize``). Logged as a diagnostic, it pays nothing."""
    prediction = normalize(prediction)
    if not prediction.strip() or not reference.strip():
        return 0.0
    return float(_scorer().score(reference, prediction)["rougeL"].fmeasure)


class TriageReward(Reward):
    """A triage component: ``score(submission, completion, gold) -> (value, details)`` per accepted sample."""

    name = "triage"

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        raise NotImplementedError

    scored: list[dict[str, Any] | None] = []
    """The last call's details per sample (None for a rejected answer): what a component logs beside its value."""

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        values, scored = [], []
        for i, s in enumerate(samples):
            gold = gold_data(s, i, GOLD_KEYS, type(self).__name__, "propel.tasks.triage.TriageTickets contexts")
            text = answer_text(s.completion, gold)
            answer = submission(text)
            value, details = (0.0, {}) if answer.rejected else self.score(answer, text, gold)
            s.info.setdefault(INFO_KEY, {}).update({self.name: value, "reason": answer.reason, **details})
            values.append(value)
            scored.append(None if answer.rejected else details)
        self.scored = scored
        return torch.tensor(values, dtype=torch.float32)
