"""What one RL step produced, declared once so callbacks read it instead of module attributes they guess at."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from propel.records import Sample
from propel.rewards.combine import RewardBreakdown


@dataclass
class StepScoring:
    """How a step's rewards reached its advantages, over the global batch (every rank's samples, the same on each):
    what ``GRPOModule`` logs under ``train/rewards/`` and ``RewardComponentMonitor`` writes to the run folder."""

    samples: int
    unscorable: int
    """Samples left out of the advantages and the loss: no paying component judged them, one that judged their
    group-mates did not, or the rollout failed outside the policy (``propel.losses.scorable``)."""
    groups: int
    skipped_groups: int
    """Groups left with fewer than two scorable samples: no relative signal, out of the loss."""
    shares: dict[str, float] = field(default_factory=dict)
    """Each paying component's share of the step's advantage variance (``propel.losses.advantage_shares``); empty
    when no group had reward variance."""
    errors: dict[str, str] = field(default_factory=dict)
    """Components that raised this step, on this rank (type and message)."""

    @property
    def unscorable_rate(self) -> float:
        return self.unscorable / self.samples if self.samples else 0.0

    def stats(self) -> dict[str, float]:
        """What a step logs (under ``train/``): ``rewards/unscorable_rate``, ``rewards/skipped_groups`` and each
        component's ``reward/<name>/adv_share``."""
        out = {"rewards/unscorable_rate": self.unscorable_rate, "rewards/skipped_groups": float(self.skipped_groups)}
        out.update({f"reward/{name}/adv_share": share for name, share in self.shares.items()})
        return out


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
    scoring: StepScoring | None = None
    """What the step could score and which component carried its advantages (None for trainers without a reward)."""

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
