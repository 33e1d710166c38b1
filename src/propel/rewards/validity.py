"""The validity gate alone: a constant for every valid task and another for every invalid one.

PROPEL's probe reward is the gate plus the probe's logit on valid tasks. Training against this reward instead is the
ablation that says whether the probe adds anything beyond the gate: with group-relative advantages only the ordering
of the two constants matters, so the policy learns "be valid" and nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from propel.records import Sample
from propel.rewards.reward import Reward


class ValidityReward(Reward):
    """``valid_value`` for a sample whose task is valid, ``invalid_value`` otherwise (the scorer's verdict).

    Args:
        valid_value: the reward of a valid task.
        invalid_value: the reward of an invalid one (below ``valid_value``).
        name: the component's name in the logs.
        weight: its weight when combined with others.
    """

    def __init__(
        self, valid_value: float = 1.0, invalid_value: float = 0.0, name: str = "validity", weight: float = 1.0
    ) -> None:
        if not invalid_value < valid_value:
            raise ValueError(f"invalid_value ({invalid_value}) must be below valid_value ({valid_value})")
        self.valid_value, self.invalid_value, self.name, self.weight = valid_value, invalid_value, name, weight

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        return torch.tensor([self.valid_value if s.valid else self.invalid_value for s in samples], dtype=torch.float32)
