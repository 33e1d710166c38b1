"""Group advantages against TRL's formula (grpo_trainer.py lines 2765-2787, TRL 1.16) and the zero-variance filter."""

from __future__ import annotations

import pytest
import torch

from propel.losses.advantages import group_advantages, zero_variance_mask


@pytest.fixture(scope="module")
def trl_utils(require):
    """TRL's utils (``nanstd``): only the parity test needs it (skipped without TRL locally, failed under CI)."""
    return require("trl.trainer.utils")


def _trl_advantages(trl_utils, rewards: torch.Tensor, g: int, scale: str) -> torch.Tensor:
    # TRL 1.16 GRPOTrainer._generate_and_score_completions, "sum_then_normalize" branch, using TRL's own nanstd.
    mean = torch.nanmean(rewards.view(-1, g), dim=1).repeat_interleave(g, dim=0)
    if scale == "batch":
        std = trl_utils.nanstd(rewards).expand_as(rewards)
    else:
        std = trl_utils.nanstd(rewards.view(-1, g), dim=1).repeat_interleave(g, dim=0)
    adv = rewards - mean
    return adv if scale == "none" else adv / (std + 1e-4)


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_matches_trl(trl_utils, scale):
    rewards = torch.randn(24, generator=torch.Generator().manual_seed(0))
    rewards[8:16] = 0.5  # one zero-variance group
    torch.testing.assert_close(group_advantages(rewards, 8, scale=scale), _trl_advantages(trl_utils, rewards, 8, scale))


def test_zero_variance_group_gives_zero_advantage_and_is_flagged_despite_float_noise():
    rewards = torch.tensor([1.0, 1.0 + 1e-9, 1.0 - 1e-9, 1.0, 0.0, 1.0, 0.0, 1.0], dtype=torch.float64)
    mask = zero_variance_mask(rewards, 4)
    assert mask.tolist() == [True] * 4 + [False] * 4
    assert group_advantages(rewards, 4)[:4].abs().max() < 1e-4
    assert not zero_variance_mask(rewards, 4, tol=1e-12)[:4].any()


def test_group_means_are_zero():
    rewards = torch.rand(32)
    adv = group_advantages(rewards, 8, scale="none").view(4, 8)
    torch.testing.assert_close(adv.mean(1), torch.zeros(4), atol=1e-6, rtol=0)


def test_bad_group_size():
    with pytest.raises(ValueError, match="group_size"):
        group_advantages(torch.zeros(10), 4)
    with pytest.raises(ValueError, match="scale"):
        group_advantages(torch.zeros(8), 4, scale="z")


def test_within_valid_share_splits_the_variance_between_the_gate_and_the_valid_ranking():
    from propel.losses.advantages import within_valid_share

    gate_only = torch.tensor([1.0, 1.0, -1.0, -1.0])
    assert within_valid_share(gate_only, torch.tensor([True, True, False, False]), 4) == 0.0
    ranked = torch.tensor([0.1, 0.5, 0.9, 0.3])
    assert within_valid_share(ranked, torch.ones(4, dtype=torch.bool), 4) == pytest.approx(1.0)
    # group 1: valid 0 and 2 (within SS 2), total SS of [0, -2, 2, -2] about its mean -0.5 = 11; group 2 flat
    rewards = torch.tensor([0.0, -2.0, 2.0, -2.0, 3.0, 3.0, 3.0, 3.0])
    valid = torch.tensor([True, False, True, False, True, True, True, True])
    assert within_valid_share(rewards, valid, 4) == pytest.approx(2.0 / 11.0)
    assert within_valid_share(torch.ones(4), torch.ones(4, dtype=torch.bool), 4) is None
