"""The episode interface of agent environments, in OpenEnv's shape: ``reset`` -> ``step`` ... -> done, plus ``state``.

One instance is one episode at a time (as a gymnasium env or an OpenEnv client); a trainer runs many episodes at once
by building many instances from one YAML ``class_path`` (jsonargparse turns it into a factory, as it does for
optimizers). ``reset`` takes the task as a ``Context`` (its prompt and gold ``data``) and the shared sandbox backend
the trainer started; ``step`` takes the model's raw action text (the environment parses it) and returns what the
model sees next. When an episode ends, the observation carries the verifier's reward and result.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from propel.records import Context
from propel.sandbox.sandbox import Sandbox

FINISH_REASONS = ("submitted", "max_turns", "time_limit", "length", "error")
"""Why an episode ended: the agent submitted; the turn budget, the wall-time budget or the context length ran out;
an infrastructure failure (sandbox or engine) ended it (such episodes are left out of group statistics)."""


@dataclass
class Observation:
    """What the model sees after ``reset`` or ``step`` (OpenEnv's Observation: content, done, reward, metadata)."""

    content: str = ""
    """Text appended to the conversation as a ``role`` message (empty when the episode ended without one)."""
    role: str = "tool"
    done: bool = False
    reward: float | None = None
    """The verifier's reward, set when ``done``."""
    turn_reward: float | None = None
    """An optional reward for the action this observation answers (shaping, e.g. a malformed call), kept in the
    turn's ``info["reward"]`` and summed by ``propel.rewards.TurnRewards``."""
    reward_components: dict[str, float] = field(default_factory=dict)
    """Named parts of the reward (logged one by one)."""
    finish_reason: str | None = None
    """One of ``FINISH_REASONS`` when ``done``."""
    metadata: dict[str, Any] = field(default_factory=dict)
    """Per-turn details: ``tool``, ``arguments``, ``exit_code``, ``duration_s``, ``truncated``, ``error``."""
    messages: list[dict[str, str]] | None = None
    """``reset`` only: the opening conversation (system and user messages) the first assistant turn answers."""


@dataclass
class EpisodeState:
    """Where an episode stands (OpenEnv's State)."""

    episode_id: str = ""
    step_count: int = 0
    """Actions taken so far."""
    done: bool = False
    finish_reason: str | None = None
    verifier: dict[str, Any] = field(default_factory=dict)
    """The verifier's result once the episode ended (``passed``, exit code, output, ...)."""
    infra_error: str | None = None
    """Set when the episode ended because infrastructure failed (not the policy's doing)."""
    files: dict[str, str | None] = field(default_factory=dict)
    """Workspace files the task asked to collect when the episode ended (path -> text; None when missing): what a
    grader outside the environment reads (an answer file, a solution)."""


class AgentEnv(ABC):
    """One episode of a multi-turn environment. Subclass it, list ``tools`` and implement ``reset`` and ``step``.

    Stop strings in ``stop`` end an assistant turn (e.g. after a tool call); ``tools`` are JSON schemas (the
    ``tools=`` argument of ``apply_chat_template``), rendered by the chat template or, when it ignores them, as
    plain text by the rollout code.
    """

    tools: list[dict[str, Any]] = []
    stop: tuple[str, ...] = ()

    @abstractmethod
    def reset(self, context: Context, sandbox: Sandbox | None = None) -> Observation:
        """Start an episode on ``context`` (``messages`` set on the returned observation); ``sandbox`` is the
        trainer's shared backend, for environments that run commands."""

    @abstractmethod
    def step(self, action: str) -> Observation:
        """Apply the model's action text (one assistant turn) and return the next observation."""

    def end(self, finish_reason: str) -> Observation:
        """End the episode from outside (turn budget, context length, time): verify and return the final
        observation. The default ends without a verifier (reward 0)."""
        return Observation(done=True, reward=0.0, finish_reason=finish_reason)

    @property
    @abstractmethod
    def state(self) -> EpisodeState: ...

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the episode's resources (its sandbox session)."""
