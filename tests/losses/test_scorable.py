"""Which samples a step learns from: judged ones, compared only with group-mates judged the same way, in groups of
at least two; and no NaN or infinity ever reaches an advantage."""

from __future__ import annotations

import math

import pytest
import torch

from propel.losses.advantages import group_advantages, within_valid_share, zero_variance_mask
from propel.losses.scorable import judged, learnable

NAN = math.nan


def test_a_sample_no_paying_component_judged_is_not_scorable():
    # two paying components and a weight-0 monitor; groups of 2
    parts = torch.tensor(
        [
            [1.0, 0.5, 7.0],  # judged by both
            [NAN, 0.0, 7.0],  # only the second judged it, but the first judged its mate: not comparable
            [NAN, 1.0, 3.0],  # the first judged no one in this group: the second alone compares them
            [NAN, 0.0, NAN],
            [NAN, NAN, 2.0],  # only the monitor judged it: a monitor never makes a sample scorable
            [1.0, NAN, NAN],  # the second judged no one here: the first alone compares them
        ]
    )
    assert judged(parts, [1.0, 0.5, 0.0], group_size=2).tolist() == [True, False, True, True, False, True]


def test_a_sample_that_makes_a_penalty_unable_to_judge_it_is_not_compared_with_the_penalised():
    """The cheapest output under a TRL-style sum is one the penalty cannot judge: it keeps the other components'
    pay and escapes the penalty its mates got. Here it is left out instead."""
    content = torch.tensor([1.0, 1.0, 1.0, 1.0])
    penalty = torch.tensor([-1.0, -1.0, -1.0, NAN])  # the fourth sample broke the penalty's judge
    keep = judged(torch.stack([content, penalty], dim=1), [1.0, 1.0], group_size=4)
    assert keep.tolist() == [True, True, True, False]
    nansum = content + torch.nan_to_num(penalty, nan=0.0)
    assert group_advantages(nansum, 4)[3] > 1.0  # what summing over the judges alone would have paid it
    assert group_advantages(nansum, 4, mask=keep)[3] == 0.0


def test_with_no_paying_component_any_judgement_counts():
    parts = torch.tensor([[1.0], [NAN], [2.0], [3.0]])
    assert judged(parts, [0.0], group_size=2).tolist() == [True, False, True, True]


def test_groups_with_fewer_than_two_kept_samples_are_skipped():
    keep = torch.tensor([True, False, False, False, True, True, True, False])
    kept, skipped = learnable(keep, 2)
    assert skipped.tolist() == [True, True, False, True]
    assert kept.tolist() == [False, False, False, False, True, True, False, False]
    with pytest.raises(ValueError, match="multiple of group_size"):
        learnable(torch.ones(3, dtype=torch.bool), 2)
    with pytest.raises(ValueError, match="components"):
        judged(torch.zeros(4, 2), [1.0], 2)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
@pytest.mark.parametrize("bad", [NAN, math.inf, -math.inf])
def test_a_nan_or_infinite_reward_never_reaches_an_advantage(scale, bad):
    rewards = torch.tensor([1.0, bad, 0.0, 2.0, 0.5, 1.5, -1.0, 3.0])
    got = group_advantages(rewards, 4, scale=scale)
    assert torch.isfinite(got).all() and got[1] == 0
    keep = torch.isfinite(rewards)
    assert torch.equal(got, group_advantages(rewards, 4, scale=scale, mask=keep))  # left out, as if masked
    # whatever the left-out entry holds changes nothing: its value never enters a mean or a std
    assert torch.equal(got, group_advantages(rewards.masked_fill(~keep, 123.0), 4, scale=scale, mask=keep))
    assert not zero_variance_mask(rewards, 4).any()
    assert math.isfinite(within_valid_share(rewards, torch.tensor([1, 0, 1, 1, 0, 1, 1, 0]).bool(), 4))


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_with_every_reward_finite_and_kept_the_advantages_are_the_unmasked_ones_bit_for_bit(scale):
    rewards = torch.randn(16, generator=torch.Generator().manual_seed(0))
    plain = group_advantages(rewards, 4, scale=scale)
    assert torch.equal(group_advantages(rewards, 4, scale=scale, mask=torch.ones(16, dtype=torch.bool)), plain)


@pytest.mark.parametrize("scale", ["group", "none"])
def test_a_group_losing_samples_leaves_every_whole_group_bit_for_bit(scale):
    rewards = torch.randn(12, generator=torch.Generator().manual_seed(1))
    keep = torch.ones(12, dtype=torch.bool)
    keep[9] = False
    got = group_advantages(rewards, 4, scale=scale, mask=keep)
    assert torch.equal(got[:8], group_advantages(rewards[:8], 4, scale=scale))
    assert torch.allclose(got[[8, 10, 11]], group_advantages(rewards[[8, 10, 11]], 3, scale=scale)) and got[9] == 0
