"""The validity gate alone: one constant per valid sample, another per invalid one."""

from __future__ import annotations

import pytest
import torch

from propel.records import Sample
from propel.rewards import CombinedReward, ValidityReward


def test_validity_reward_pays_the_scorers_verdict_only():
    samples = [Sample(prompt="p", completion=c, valid=v) for c, v in (("a", True), ("bb", False), ("ccc", True))]
    assert ValidityReward()(samples).tolist() == [1.0, 0.0, 1.0]
    assert ValidityReward(valid_value=0.0, invalid_value=-8.5)(samples).tolist() == [0.0, -8.5, 0.0]
    total = CombinedReward([ValidityReward(weight=2.0)])(samples).total
    assert torch.equal(total, torch.tensor([2.0, 0.0, 2.0]))


def test_validity_reward_refuses_an_order_that_would_pay_invalid_tasks():
    with pytest.raises(ValueError, match="must be below"):
        ValidityReward(valid_value=0.0, invalid_value=1.0)
