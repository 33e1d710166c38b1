"""CombinedReward's signal cost: each component's wall time and the seconds per scored sample."""

import time

import pytest
import torch

from propel.rewards import CombinedReward, FunctionReward
from propel.rewards.reward import Reward
from propel.rollouts.record import Sample


class _Slow(Reward):
    """A component that takes a known time per call (a stand-in for a solver or a probe forward)."""

    def __init__(self, name: str, seconds: float) -> None:
        self.name, self.seconds = name, seconds

    def __call__(self, samples):
        time.sleep(self.seconds)
        return torch.zeros(len(samples))


def test_each_component_is_timed_and_the_cost_per_sample_is_their_sum():
    samples = [Sample(prompt="p", completion=str(i)) for i in range(4)]
    out = CombinedReward([_Slow("slow", 0.2), FunctionReward("fast", lambda s: 1.0)])(samples)
    stats = out.stats()
    assert 0.2 <= stats["reward/slow/seconds"] < 2.0
    assert 0.0 <= stats["reward/fast/seconds"] < stats["reward/slow/seconds"]
    spent = stats["reward/slow/seconds"] + stats["reward/fast/seconds"]
    assert stats["reward/seconds_per_sample"] == pytest.approx(spent / 4)
