"""The rollout record: what one episode of a policy produced, token-exact, and what scoring made of it.

A single-turn rollout is one assistant ``Turn`` after the prompt; a multi-turn agent episode appends assistant turns
and environment observations (``trainable=False``) in order. The token ids are exactly those the engine saw and
produced: a trajectory is never re-tokenized, and ``propel.rollouts.pack`` lays them out for the loss.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from propel.records.context import Context


@dataclass
class Turn:
    """One segment of a trajectory after the prompt: an assistant turn (trained on) or an observation (masked)."""

    role: str
    """``assistant`` for policy tokens; ``tool``/``user``/``observation`` for what the environment appended."""
    text: str
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] | None = None
    """The engine's logprobs of ``token_ids`` (assistant turns sampled with ``logprobs=True``), else None."""
    trainable: bool = True
    """Whether the loss sees these tokens (assistant turns: yes; observations: no)."""
    finish_reason: str = "length"
    """Why the engine stopped an assistant turn (``stop``/``length``); empty for observations."""
    info: dict[str, Any] = field(default_factory=dict)
    """Per-turn details an environment reports (tool, arguments, exit code, duration, truncation, error)."""


@dataclass
class Sample:
    """One rollout and its scoring: the context it came from, the exact tokens, and its verdict (a
    ``Scorer``'s, or an agent environment's).

    Rewards read samples; callbacks read them from the step's ``RolloutState``; labeling writes them to pools.
    """

    prompt: str
    """The exact text fed to the model (chat template applied)."""
    completion: str
    """The assistant's text (all assistant turns joined, for multi-turn rollouts)."""
    valid: bool = True
    """The cheap validity verdict of the scorer or agent environment (parses, runs, ...)."""
    task: Any = None
    """The domain's parsed structure (None when malformed)."""
    topic: str | None = None
    info: dict[str, Any] = field(default_factory=dict)
    """Scoring details: ``reason`` (why invalid, ``ok`` otherwise), ``task_text`` (the rendered task), ..."""
    context: Context | None = None
    """The context the rollout answered: its id, group and gold ``data`` (what a reward may grade against)."""
    prompt_ids: list[int] = field(default_factory=list)
    """Token ids of ``prompt`` as the engine encoded them."""
    turns: list[Turn] = field(default_factory=list)
    """Everything after the prompt, in order."""
    artifacts: dict[str, Any] = field(default_factory=dict)
    """What the episode left behind for verifiers and reports (a diff, test results, files)."""
    infra_error: str | None = None
    """Why the rollout failed for reasons outside the policy (sandbox or engine): such rollouts are left out of
    group statistics and the loss instead of being scored 0."""
    segments: list[Sample] = field(default_factory=list)
    """Earlier segments of a step-wise episode, oldest first (empty when the chat template is append-only). When the
    template re-renders history (e.g. strips past reasoning), the conversation is tokenized afresh and the episode
    goes on from those ids: each segment is then an exact ``(prompt_ids, turns)`` the model saw and produced, and
    this sample is the last segment. A segment's last observation has no tokens there (they open the next
    segment's prompt) but keeps its text and info."""

    @property
    def task_text(self) -> str:
        """The domain's rendering of the parsed task (what labeling pools and probes read), else the completion."""
        return self.info.get("task_text") or self.completion

    @property
    def response_ids(self) -> list[int]:
        """All token ids after the prompt, turns concatenated."""
        return [t for turn in self.turns for t in turn.token_ids]

    @property
    def turn_spans(self) -> list[tuple[int, int]]:
        """``[start, end)`` of each turn in the full token sequence (prompt included)."""
        spans, at = [], len(self.prompt_ids)
        for turn in self.turns:
            spans.append((at, at + len(turn.token_ids)))
            at += len(turn.token_ids)
        return spans

    @property
    def all_turns(self) -> list[Turn]:
        """Every turn of the episode, across step-wise segments."""
        return [t for segment in self.segments for t in segment.turns] + self.turns

    @property
    def assistant_texts(self) -> list[str]:
        """The text of each assistant turn of the episode, in order (what a trajectory probe reads)."""
        return [t.text for t in self.all_turns if t.trainable]

    @property
    def assistant_length(self) -> int:
        """Tokens the policy generated in the whole episode (observations excluded): what length penalties count."""
        return sum(len(t.token_ids) for t in self.all_turns if t.trainable)
