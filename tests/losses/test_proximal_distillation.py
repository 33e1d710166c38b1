"""The proximal variant against a hand-written PPO clip: the surrogate and where it binds, the gradient at ratio 1
(the sampled reverse-KL gradient), no push past the band in the advantage's direction, unknown rollout logprobs
(ratio 1), masked positions out of the loss; the advantage is the teacher-student log-ratio of the sampled token."""

from __future__ import annotations

import math

import torch

from propel.losses.proximal_distillation import distillation_advantage, proximal_distillation


def _hand(logp, old, adv, eps):
    """PPO's clipped objective per token, one scalar at a time."""
    ratio = math.exp(logp - old)
    return -min(ratio * adv, min(max(ratio, 1 - eps), 1 + eps) * adv)


def test_matches_a_hand_written_clip_and_stops_the_push_past_the_band():
    logp = torch.tensor([[-1.0, -2.0, -0.5, -3.0]], requires_grad=True)
    old = torch.tensor([[-1.0, -2.5, 0.0, -2.0]])  # ratios 1, e^0.5, e^-0.5, e^-1
    adv = torch.tensor([[0.7, 1.2, -0.4, 0.3]])
    mask = torch.ones(1, 4)
    per_token, clipped = proximal_distillation(logp, old, adv, mask, eps=0.2)
    want = [_hand(float(logp.detach()[0, j]), float(old[0, j]), float(adv[0, j]), 0.2) for j in range(4)]
    torch.testing.assert_close(per_token[0], torch.tensor(want))
    # ratio e^0.5 > 1.2 with A > 0 and e^-0.5 < 0.8 with A < 0: the clip binds; e^-1 with A > 0 does not (min)
    assert clipped.tolist() == [[False, True, True, False]]
    per_token.sum().backward()
    ratio = torch.exp(logp.detach() - old)
    want_grad = torch.where(clipped, torch.zeros(1, 4), -adv * ratio)
    torch.testing.assert_close(logp.grad, want_grad)
    assert logp.grad[0, 0] == -adv[0, 0]  # ratio 1: the advantage-weighted log-likelihood gradient


def test_unknown_rollout_logprobs_mean_ratio_1_and_masked_tokens_are_out():
    logp = torch.tensor([[-1.0, -2.0, float("-inf")]], requires_grad=True)  # the last: a pad the warping removed
    old = torch.tensor([[float("nan"), -9.0, 0.0]])
    adv = torch.tensor([[2.0, -1.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    per_token, clipped = proximal_distillation(logp, old, adv, mask, eps=0.2)
    assert per_token[0, 0].item() == -2.0 and not clipped[0, 0]  # NaN: the current policy's own, ratio 1
    assert per_token[0, 2].item() == 0.0 and not clipped[0, 2]
    per_token.sum().backward()
    assert torch.isfinite(logp.grad).all() and logp.grad[0, 2] == 0


def test_the_advantage_is_the_teacher_student_log_ratio_of_the_sampled_token():
    g = torch.Generator().manual_seed(0)
    student, teacher = torch.randn(2, 3, 7, generator=g), torch.randn(2, 3, 7, generator=g)
    tokens = torch.randint(0, 7, (2, 3), generator=g)
    got = distillation_advantage(student, teacher, tokens, temperature=0.5)
    p_s, p_t = torch.softmax(student / 0.5, -1), torch.softmax(teacher / 0.5, -1)
    want = (p_t.gather(-1, tokens[..., None]) / p_s.gather(-1, tokens[..., None])).log()[..., 0]
    torch.testing.assert_close(got, want)
    # its mean under the student's own sampling is minus the reverse KL (what on-policy distillation minimises)
    tokens_all = torch.arange(7).expand(2, 3, 7)
    per_token = torch.stack([distillation_advantage(student, teacher, tokens_all[..., v]) for v in range(7)], -1)
    log_s, log_t = torch.log_softmax(student, -1), torch.log_softmax(teacher, -1)
    reverse_kl = (log_s.exp() * (log_s - log_t)).sum(-1)
    torch.testing.assert_close((log_s.exp() * per_token).sum(-1), -reverse_kl)
