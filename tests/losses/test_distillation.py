"""Distillation divergences against references: TRL's GKD generalized JSD (forward KL at beta 0, reverse KL at 1),
torch's kl_div, and a hand-written float64 JSD; the top-k support with its tail bucket (TRL's SDPO); clipping."""

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


def _hand_top_k_with_tail(s, t, k):
    """Float64 probabilities of the teacher's top-k tokens and one tail bucket (the rest), for both sides."""
    p_s, p_t = torch.softmax(s.double(), -1), torch.softmax(t.double(), -1)
    index = t.topk(k, -1).indices
    top_s, top_t = p_s.gather(-1, index), p_t.gather(-1, index)
    return (torch.cat([top_s, 1 - top_s.sum(-1, keepdim=True)], -1),
            torch.cat([top_t, 1 - top_t.sum(-1, keepdim=True)], -1))  # fmt: skip


def test_top_k_keeps_the_rest_of_the_vocabulary_as_a_tail_bucket():
    """The teacher's top-k tokens plus one bucket for all other tokens, so student mass outside the
    top-k is penalised (a renormalised top-k would score a student that moved mass there as unchanged)."""
    s, t = _logits(2, (2, 4, 8))
    full = token_divergence(s, t, DivergenceSpec("forward_kl"))
    torch.testing.assert_close(token_divergence(s, t, DivergenceSpec("forward_kl", top_k=8)), full)  # k = V: full
    k = 3
    q_s, q_t = _hand_top_k_with_tail(s, t, k)
    want = (q_t * (q_t / q_s).log()).sum(-1)
    got = token_divergence(s, t, DivergenceSpec("forward_kl", top_k=k))
    torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-6)
    # the student moves mass from the teacher's top-k to other tokens, in proportion inside the top-k: renormalised
    # over the top-k it would look unchanged (divergence 0); the tail bucket sees the leak
    index = t.topk(k, -1).indices
    inside = torch.zeros_like(t, dtype=torch.bool).scatter(-1, index, True)
    leaky = torch.where(inside, t, t + 3.0)
    assert token_divergence(t, t, DivergenceSpec("forward_kl", top_k=k)).abs().max() < 1e-6
    assert token_divergence(leaky, t, DivergenceSpec("forward_kl", top_k=k)).min() > 0.1


@pytest.mark.parametrize(("kind", "alpha"), [("forward_kl", 0.0), ("reverse_kl", 1.0), ("jsd", 0.3), ("jsd", 0.5)])
def test_top_k_tail_matches_trl_self_distillation(kind, alpha, require):
    """Parity with TRL's top-k distillation with a tail bucket (``trl.experimental.sdpo``): TRL's loss-utils path
    on the teacher's top-k support (as its server distillation projects it), and TRL's own top-k loss where the
    student's top-k is the teacher's (TRL takes the student's top-k; they then compute the same thing)."""
    sdpo = require("trl.experimental.sdpo.loss_utils")
    s, t = _logits(5, (3, 4, 13))
    k = 4
    spec = DivergenceSpec(kind, beta=alpha if kind == "jsd" else 0.5, top_k=k)
    got = token_divergence(s, t, spec)
    index = t.topk(k, -1).indices
    top_s = torch.log_softmax(s, -1).gather(-1, index)
    top_t = torch.log_softmax(t, -1).gather(-1, index)
    trl = sdpo.compute_divergence(sdpo.add_tail_bucket(top_s), sdpo.add_tail_bucket(top_t), alpha)
    torch.testing.assert_close(got, trl, rtol=1e-5, atol=1e-6)
    top_t = t.gather(-1, index)
    lifted = s.max(-1, keepdim=True).values + 0.5 + top_t - top_t.min(-1, keepdim=True).values
    same_support = s.scatter(-1, index, lifted)  # the student's top-k: the teacher's (with a tail TRL does not clamp)
    trl = sdpo.compute_topk_self_distillation_loss(
        same_support, t, distillation_topk=k, distillation_alpha=alpha, distillation_add_tail=True
    )
    torch.testing.assert_close(token_divergence(same_support, t, spec), trl, rtol=1e-5, atol=1e-6)


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
