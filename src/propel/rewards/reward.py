"""What a reward is (``Reward``, the ``RewardComponent`` protocol) and what it may prepare with (``RewardContext``).

A reward reads scored rollouts (``propel.rollouts.Sample``): the scorer's verdict (``valid``, ``task``,
``info``) and the context's gold data (``sample.context.data``). A reward that needs a model (a probe reading the
frozen reference) gets it once, before training, through ``setup(context)``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from propel.rollouts.record import Sample


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
    """A named reward term: one float per sample; the total is the weight-sum of the components."""

    name: str
    weight: float

    def setup(self, context: RewardContext) -> None: ...

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor: ...


def gold_data(sample: Sample, index: int, keys: Sequence[str], reward: str, source: str) -> dict[str, Any]:
    """The context's gold data a reward grades against, refused (one ``ValueError`` naming what is missing and where
    such contexts come from) when any of ``keys`` is absent."""
    data = sample.context.data if sample.context is not None else {}
    missing = [k for k in keys if k not in data]
    if missing:
        raise ValueError(
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
    """A component from a per-sample function (``Sample -> float``), e.g. a format or length check."""

    def __init__(self, name: str, fn: Callable[[Sample], float], weight: float = 1.0) -> None:
        self.name, self.fn, self.weight = name, fn, weight

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        return torch.tensor([float(self.fn(s)) for s in samples], dtype=torch.float32)
