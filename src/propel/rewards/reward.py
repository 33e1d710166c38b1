"""What a reward is (``Reward``, the ``RewardComponent`` protocol) and what it may prepare with (``RewardContext``).

A reward reads scored rollouts (``propel.records.Sample``): the scorer's verdict (``valid``, ``task``,
``info``) and the context's gold data (``sample.context.data``). A reward that needs a model (a probe reading the
frozen reference) gets it once, before training, through ``setup(context)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from propel.errors import ConfigError
from propel.records import Sample


@dataclass
class RewardContext:
    """What the trainer offers rewards at setup: the policy (adapters can be disabled for a frozen reference)."""

    policy: Any = None
    """The trained policy (a peft model for LoRA trainers)."""
    tokenizer: Any = None
    model_name: str | None = None
    """The policy's base model (alias, folder or hub id): a reward whose reference is this model may share it."""


@runtime_checkable
class RewardComponent(Protocol):
    """A named reward term: one float per sample, NaN where it cannot judge the sample (never a made-up 0); the
    total is the weight-sum of the components that judged it (``propel.rewards.combine``)."""

    name: str
    weight: float

    def setup(self, context: RewardContext) -> None: ...

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor: ...


def gold_data(sample: Sample, index: int, keys: Sequence[str], reward: str, source: str) -> dict[str, Any]:
    """The context's gold data a reward grades against, refused (one ``ConfigError`` naming what is missing and where
    such contexts come from: the run's contexts, not a sample, are wrong) when any of ``keys`` is absent."""
    data = sample.context.data if sample.context is not None else {}
    missing = [k for k in keys if k not in data]
    if missing:
        raise ConfigError(
            f"{reward} grades against the context's data {list(keys)}; sample {index} lacks {missing} (use {source})"
        )
    return data


class Reward:
    """Base class of reward components: a name, a weight, an optional ``setup`` and ``__call__(samples)``."""

    name: str = "reward"
    weight: float = 1.0

    def setup(self, context: RewardContext) -> None:  # noqa: B027 - optional hook
        """Prepare before the first call (load models, share the policy); the default needs nothing."""

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        raise NotImplementedError


class FunctionReward(Reward):
    """A component from a per-sample function (``Sample -> float``, or None where it cannot judge the sample: NaN),
    e.g. a format or length check."""

    def __init__(self, name: str, fn: Callable[[Sample], float | None], weight: float = 1.0) -> None:
        self.name, self.fn, self.weight = name, fn, weight

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        values = [self.fn(s) for s in samples]
        return torch.tensor([math.nan if v is None else float(v) for v in values], dtype=torch.float32)


class ValidTaskReward(Reward):
    """A reward paid on valid tasks only (at least 0) whose invalid samples get ``floor`` (below 0): the shape of
    the solver-backed rewards (solver in the loop, exact utility). ``graded`` picks the samples it pays."""

    def __init__(self, floor: float, name: str, weight: float, zero_means: str) -> None:
        if not floor < 0:
            raise ConfigError(f"floor must be below 0 ({zero_means} scores 0), got {floor}")
        self._floor, self.name, self.weight = float(floor), name, weight

    @property
    def floor(self) -> float:
        """The reward of invalid samples (what ``RewardFloorCheck`` compares valid rewards with)."""
        return self._floor

    @staticmethod
    def graded(samples: Sequence[Sample]) -> list[int]:
        """Indices of the samples with a valid parsed task and no infrastructure error."""
        return [i for i, s in enumerate(samples) if s.valid and s.task is not None and s.infra_error is None]

    @staticmethod
    def solver_model(solver_model: str | None, policy_model: str | None, reward: str) -> str:
        """The solver's model: its own, else the policy's base model (a separate frozen copy is loaded from it)."""
        name = solver_model or policy_model
        if name is None:
            raise ConfigError(f"{reward}: set solver.model (no policy base model was offered at setup)")
        return name
