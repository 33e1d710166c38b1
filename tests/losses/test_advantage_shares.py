"""Each component's share of the advantage variance: Cov(w_c r_c, R) / Var(R) within groups, summing to 1."""

from __future__ import annotations

import math

import pytest
import torch

from propel.losses.advantage_shares import advantage_shares


def _brute(x: torch.Tensor, g: int, scale: str) -> torch.Tensor:
    """The docstring's formula, group by group with torch.cov (Bessel factors cancel in the ratio)."""
    num, den = torch.zeros(x.shape[1], dtype=torch.float64), 0.0
    for group in x.double().split(g):
        total = group.sum(1)
        var = float(total.var(unbiased=False))
        cov = torch.stack([torch.cov(torch.stack([group[:, c], total]), correction=0)[0, 1] for c in range(x.shape[1])])
        a = 1.0 / var if scale == "group" else 1.0
        num, den = num + a * cov, den + a * var
    return num / den


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_shares_follow_the_definition_and_sum_to_one(scale):
    x = torch.randn(24, 3, generator=torch.Generator().manual_seed(0)) * torch.tensor([1.0, 0.3, 2.0])
    got = advantage_shares(x, 4, scale=scale)
    assert torch.allclose(got, _brute(x, 4, scale), atol=1e-12)
    assert float(got.sum()) == pytest.approx(1.0, abs=1e-12)


def test_uncorrelated_components_split_by_their_variances_and_a_constant_one_gets_nothing():
    a, b = torch.tensor([1.0, -1.0, 1.0, -1.0]), torch.tensor([1.0, 1.0, -1.0, -1.0])  # orthogonal within the group
    offset = torch.full((4,), 5.0)  # a large reward that is the same for every completion of the prompt
    got = advantage_shares(torch.stack([3 * a, b, offset], dim=1), 4)
    assert got.tolist() == pytest.approx([0.9, 0.1, 0.0])


def test_a_penalty_pulling_against_the_total_has_a_negative_share():
    content = torch.tensor([2.0, 1.0, 0.0, 0.0])
    penalty = torch.tensor([-0.5, 0.0, 0.0, 0.0])  # fires on the best-paid sample
    got = advantage_shares(torch.stack([content, penalty], dim=1), 4)
    assert got[1] < 0 < 1 < got[0] and float(got.sum()) == pytest.approx(1.0)


def test_group_scaling_weighs_groups_alike_and_pooling_by_their_variance():
    a, b = torch.tensor([1.0, -1.0]), torch.tensor([1.0, -1.0])
    x = torch.zeros(4, 2)
    x[:2, 0] = 10 * a  # group 1: component 0 alone, large spread
    x[2:, 1] = 0.1 * b  # group 2: component 1 alone, small spread
    assert advantage_shares(x, 2, scale="group").tolist() == pytest.approx([0.5, 0.5])
    pooled = advantage_shares(x, 2, scale="none")
    assert pooled.tolist() == pytest.approx([100 / 100.01, 0.01 / 100.01])


def test_left_out_samples_and_unjudged_values_count_as_the_total_counts_them():
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [math.nan, 0.5], [9.0, 9.0]])
    keep = torch.tensor([True, True, True, False])
    got = advantage_shares(x, 4, keep=keep)
    want = advantage_shares(torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.0, 0.5]]), 3)
    assert torch.allclose(got, want)


def test_no_variance_no_shares():
    assert advantage_shares(torch.ones(8, 2), 4) is None
    assert advantage_shares(torch.randn(8, 2), 4, keep=torch.tensor([True] + [False] * 7)) is None
    with pytest.raises(ValueError, match="scale"):
        advantage_shares(torch.ones(4, 1), 4, scale="rank")
