"""Rollouts left out of a group (infrastructure failures): they do not move their group's statistics; and masked
positions holding -inf logprobs (tool output under top-p) leave the loss and its gradient finite."""

from __future__ import annotations

import pytest
import torch

from propel.losses.advantages import group_advantages, zero_variance_mask
from propel.losses.policy_gradient import LossSpec, policy_loss


@pytest.mark.parametrize("scale", ["group", "batch", "none"])
def test_masked_entries_are_as_if_absent(scale):
    rewards = torch.tensor([1.0, 0.0, 5.0, 0.5, 2.0, 1.0, -3.0, 0.0])
    keep = torch.tensor([True, True, False, True, True, True, True, False])
    got = group_advantages(rewards, 4, scale=scale, mask=keep)
    assert torch.all(got[~keep] == 0)
    # group statistics over the kept entries only: the same as a batch of just them (groups of 3)
    kept = group_advantages(rewards[keep], 3, scale=scale)
    assert torch.allclose(got[keep], kept, atol=1e-6)
    assert torch.equal(
        group_advantages(rewards, 4, scale=scale, mask=torch.ones(8, dtype=torch.bool)),
        group_advantages(rewards, 4, scale=scale),
    )


def test_a_group_with_one_kept_rollout_has_no_signal():
    rewards = torch.tensor([1.0, 7.0, 0.0, 2.0])
    keep = torch.tensor([True, False, True, True])
    assert torch.all(group_advantages(rewards, 2, mask=keep)[:2] == 0)
    assert zero_variance_mask(rewards, 2, mask=keep).tolist() == [True, True, False, False]
    assert zero_variance_mask(torch.tensor([1.0, 9.0, 2.0, 2.0]), 2, mask=torch.tensor([True, False, True, True])).all()


def test_minus_infinity_on_masked_positions_stays_out_of_loss_and_gradient():
    torch.manual_seed(0)
    logp = torch.randn(2, 6).clamp(max=-0.1)
    mask = torch.tensor([[1, 1, 0, 0, 1, 0], [1, 0, 0, 1, 1, 1]], dtype=torch.float32)
    poisoned = logp.masked_fill(mask == 0, float("-inf"))
    for spec in (LossSpec("grpo"), LossSpec("dapo"), LossSpec("dr_grpo", beta=0.0)):
        results = []
        for x in (logp, poisoned):
            x = x.clone().requires_grad_(True)
            out = policy_loss(x, x.detach(), torch.tensor([1.0, -0.5]), mask, spec, ref_logp=x.detach() - 0.1)
            out.loss.backward()
            results.append((out.loss.detach(), x.grad))
        (clean_loss, clean_grad), (loss, grad) = results
        assert torch.isfinite(loss) and torch.equal(loss, clean_loss)
        assert torch.isfinite(grad).all() and torch.equal(grad, clean_grad) and torch.all(grad[mask == 0] == 0)
