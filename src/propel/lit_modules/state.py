"""What one RL step produced, declared once so callbacks read it instead of module attributes they guess at."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from propel.rewards.combine import RewardBreakdown
from propel.rollouts.record import Sample


@dataclass
class RolloutState:
    """The latest step's scored rollouts (``LoRAPolicyModule.rollout_state``; None before the first step)."""

    step: int
    """The optimizer step the rollouts were sampled at (``global_step`` before the update)."""
    samples: list[Sample] = field(default_factory=list)
    rewards: RewardBreakdown | None = None
    """Total and per-component rewards, one value per sample (None for trainers without a reward)."""
    policy_version: int | None = None
    """The optimizer step whose weights sampled the rollouts (below ``step`` with asynchronous rollouts; None when
    the trainer does not say)."""

    @property
    def valid_samples(self) -> list[Sample]:
        return [s for s in self.samples if s.valid]

    @property
    def task_texts(self) -> list[str]:
        """Rendered texts of the valid samples: what diversity is measured on (as in evaluation)."""
        return [s.task_text for s in self.valid_samples]

    @property
    def topics(self) -> list[str | None]:
        """Topics of the valid samples, aligned with ``task_texts``."""
        return [s.topic for s in self.valid_samples]


@runtime_checkable
class RolloutPublisher(Protocol):
    """A LightningModule that publishes each step's rollouts (``LoRAPolicyModule`` and its trainers do)."""

    rollout_state: RolloutState | None
