"""CombinedReward: each component timed with the cost per sample, and what a component cannot judge (None, NaN, an
infinity, an exception) left out of the total instead of counted 0."""

import math
import time

import pytest
import torch

from propel.records import Sample
from propel.rewards import CombinedReward, FunctionReward
from propel.rewards.reward import Reward


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


# ------------------------------------------------------------------------------------ what a reward cannot judge
class _Values(Reward):
    """A component returning fixed values (a list may hold None), or raising ``error``."""

    def __init__(self, name: str, values, weight: float = 1.0, error: Exception | None = None) -> None:
        self.name, self.values, self.weight, self.error = name, values, weight, error

    def __call__(self, samples):
        if self.error is not None:
            raise self.error
        return self.values


def _samples(n: int) -> list[Sample]:
    return [Sample(prompt="p", completion=str(i)) for i in range(n)]


def test_none_nan_and_infinity_are_not_judgements_and_the_total_sums_what_judged():
    nan, inf = float("nan"), float("inf")
    out = CombinedReward(
        [
            _Values("a", [1.0, None, nan, None, 2.0]),
            _Values("b", torch.tensor([0.5, 1.0, inf, nan, -inf]), weight=2.0),
            _Values("monitor", [3.0, 3.0, 3.0, 3.0, 3.0], weight=0.0),  # logs only: never makes a sample scorable
        ]
    )(_samples(5))
    assert torch.isnan(out.components["a"][[1, 2, 3]]).all() and torch.isnan(out.components["b"][[2, 3, 4]]).all()
    total = out.total.tolist()
    assert total[:2] == [2.0, 2.0] and total[4] == 2.0  # 1 + 2*0.5; 2*1 (a did not judge); 2 (b did not)
    assert math.isnan(total[2]) and math.isnan(total[3])  # no paying component judged them: unscorable, not 0
    stats = out.stats()
    assert stats["reward/mean"] == pytest.approx(2.0) and stats["reward/a/mean"] == pytest.approx(1.5)
    assert stats["reward/a/unscored"] == pytest.approx(0.6) and stats["reward/monitor/unscored"] == 0.0
    assert all(math.isfinite(v) for v in stats.values())
    assert out.weights == {"a": 1.0, "b": 2.0, "monitor": 0.0}


def test_with_every_value_judged_the_total_is_the_plain_weighted_sum_bit_for_bit():
    values = [torch.randn(16, generator=torch.Generator().manual_seed(k)) for k in range(3)]
    weights = [1.0, 0.3, -0.7]
    out = CombinedReward([_Values(f"c{k}", v, w) for k, (v, w) in enumerate(zip(values, weights, strict=True))])
    plain = torch.zeros(16)
    for v, w in zip(values, weights, strict=True):
        plain = plain + w * v
    assert torch.equal(out(_samples(16)).total, plain)


def test_a_reward_that_raises_judged_nothing_and_its_exception_type_is_logged_once(caplog):
    from propel.errors import ConfigError

    parts = [_Values("ok", [1.0, 0.0]), _Values("broken", [1.0, 1.0], error=KeyError("verdict"))]
    with caplog.at_level("WARNING", logger="propel.rewards.combine"):
        out = CombinedReward(parts)(_samples(2))
    assert out.total.tolist() == [1.0, 0.0] and torch.isnan(out.components["broken"]).all()
    assert out.errors == {"broken": "KeyError: 'verdict'"}
    (record,) = caplog.records
    assert record.getMessage().startswith("propel: reward 'broken' raised KeyError")
    with pytest.raises(ConfigError, match="set-up"):  # the run's set-up is wrong, not a sample: stop
        CombinedReward([_Values("cfg", [1.0], error=ConfigError("set-up"))])(_samples(1))
    with pytest.raises(ValueError, match="returned 1 values for 2"):  # the reward's own bug, on every step: stop
        CombinedReward([_Values("short", [1.0])])(_samples(2))
