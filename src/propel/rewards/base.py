"""What a reward sees (``Sample``) and what a reward is (``RewardComponent``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch


@dataclass
class Sample:
    """One scored completion: the prompt text, the completion, and what the domain made of it."""

    prompt: str
    completion: str
    valid: bool = True
    """The domain's cheap validity verdict (parses, runs, ...)."""
    task: Any = None
    """The domain's parsed structure (None when malformed)."""
    topic: str | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def task_text(self) -> str:
        """The domain's rendering of the parsed task (what labeling pools and probes read), else the completion."""
        return self.info.get("task_text") or self.completion


@runtime_checkable
class RewardComponent(Protocol):
    """A named reward term: one float per sample; the total is the weight-sum of the components."""

    name: str
    weight: float

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor: ...


class FunctionReward:
    """A component from a per-sample function (``Sample -> float``), e.g. a format or length check."""

    def __init__(self, name: str, fn: Callable[[Sample], float], weight: float = 1.0) -> None:
        self.name, self.fn, self.weight = name, fn, weight

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        return torch.tensor([float(self.fn(s)) for s in samples], dtype=torch.float32)
