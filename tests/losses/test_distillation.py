"""Distillation divergences against references: TRL's GKD generalized JSD (forward KL at beta 0, reverse KL at 1),
torch's kl_div, and a hand-written float64 JSD; top-k renormalisation; clipping."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from propel.errors import ConfigError
from propel.losses.distillation import DivergenceSpec, masked_mean, token_divergence


def _logits(seed=0, shape=(3, 5, 11)):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g) * 2, torch.randn(*shape, generator=g) * 2


def _hand_jsd(s, t, beta):
    """Generalized JSD in float64 from probabilities: beta KL(t||m) + (1-beta) KL(s||m), m = beta t + (1-beta) s."""
    p_s, p_t = torch.softmax(s.double(), -1), torch.softmax(t.double(), -1)
    m = beta * p_t + (1 - beta) * p_s
    return beta * (p_t * (p_t / m).log()).sum(-1) + (1 - beta) * (p_s * (p_s / m).log()).sum(-1)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_forward_and_reverse_kl_match_kl_div(temperature):
    s, t = _logits()
    log_s, log_t = F.log_softmax(s / temperature, -1), F.log_softmax(t / temperature, -1)
    forward = token_divergence(s, t, DivergenceSpec("forward_kl"), temperature)
    reverse = token_divergence(s, t, DivergenceSpec("reverse_kl"), temperature)
    torch.testing.assert_close(forward, F.kl_div(log_s, log_t, reduction="none", log_target=True).sum(-1))
    torch.testing.assert_close(reverse, F.kl_div(log_t, log_s, reduction="none", log_target=True).sum(-1))
    p_t = torch.softmax(t.double() / temperature, -1)  # and from the definition, in float64
    want = (p_t * (p_t.log() - torch.log_softmax(s.double() / temperature, -1))).sum(-1)
    torch.testing.assert_close(forward.double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("beta", [0.1, 0.5, 0.9])
def test_jsd_matches_a_hand_written_one_and_trl(beta, require):
    GKDTrainer = require("trl.experimental.gkd.gkd_trainer").GKDTrainer  # noqa: N806 - the class, as TRL names it

    s, t = _logits(1)
    got = token_divergence(s, t, DivergenceSpec("jsd", beta=beta))
    torch.testing.assert_close(got.double(), _hand_jsd(s, t, beta), rtol=1e-5, atol=1e-6)
    trl = GKDTrainer.generalized_jsd_loss(s, t, beta=beta, reduction="sum")
    torch.testing.assert_close(got.sum(), trl.float(), rtol=1e-5, atol=1e-5)
    # TRL's endpoints are the KLs, in the same convention
    for b, kind in ((0.0, "forward_kl"), (1.0, "reverse_kl")):
        trl = GKDTrainer.generalized_jsd_loss(s, t, beta=b, reduction="sum")
        torch.testing.assert_close(token_divergence(s, t, DivergenceSpec(kind)).sum(), trl, rtol=1e-5, atol=1e-5)


def test_top_k_renormalises_over_the_teachers_top_tokens():
    s, t = _logits(2, (2, 4, 8))
    full = token_divergence(s, t, DivergenceSpec("forward_kl"))
    torch.testing.assert_close(token_divergence(s, t, DivergenceSpec("forward_kl", top_k=8)), full)
    k = 3
    index = t.topk(k, -1).indices
    p_t = torch.softmax(t.gather(-1, index).double(), -1)
    p_s = torch.softmax(s.gather(-1, index).double(), -1)
    want = (p_t * (p_t / p_s).log()).sum(-1)
    got = token_divergence(s, t, DivergenceSpec("forward_kl", top_k=k))
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    assert not torch.allclose(got, full)


def test_clipping_caps_values_and_stops_their_gradient():
    s, t = _logits(3)
    s.requires_grad_(True)
    raw = token_divergence(s, t, DivergenceSpec("reverse_kl"))
    cap = float(raw.detach().median())
    clipped = token_divergence(s, t, DivergenceSpec("reverse_kl", clip=cap))
    assert clipped.max() <= cap and torch.equal(clipped.detach() < cap, raw.detach() < cap)
    clipped.sum().backward()
    over = (raw.detach() > cap)[..., None].expand_as(s)
    assert s.grad[over].abs().max() == 0 and s.grad[~over].abs().max() > 0


def test_identical_distributions_give_zero_and_mean_counts_masked_tokens():
    s, _ = _logits(4)
    for kind in ("forward_kl", "reverse_kl", "jsd"):
        assert token_divergence(s, s.clone(), DivergenceSpec(kind)).abs().max() < 1e-6
    values, mask = torch.tensor([[1.0, 2.0, 3.0]]), torch.tensor([[1, 0, 1]])
    assert masked_mean(values, mask).item() == 2.0 and masked_mean(values, mask, count=4).item() == 1.0
    assert math.isclose(masked_mean(values, torch.zeros(1, 3)).item(), 0.0)


def test_bad_specs_are_refused():
    for kwargs in ({"kind": "kl"}, {"kind": "jsd", "beta": 1.0}, {"top_k": -1}, {"clip": 0.0}):
        with pytest.raises(ConfigError):
            DivergenceSpec(**kwargs)
