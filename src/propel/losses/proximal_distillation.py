"""The seed's proximal variant of turn-targeted distillation: a PPO-clipped update toward the teacher on turn t.

Seed 002 updates the student "with a proximal policy optimization variant that clips updates": on the sampled tokens
of turn t, the per-token advantage is the teacher-student log-ratio ``log p_teacher(y) - log p_student(y)`` (what
on-policy distillation uses as a per-token reward: its expectation under the student is minus the reverse KL), and
the ratio ``p_now(y) / p_rollout(y)`` of the current policy to the one that sampled the turn is clipped to
``[1 - eps, 1 + eps]`` as in PPO. With one update per rollout and the policy as its own sampler the ratio is 1 and
the gradient is the sampled reverse-KL gradient; the clip acts when the sampler lags the policy (an engine that is
not the policy, or several updates on the same rollouts) and stops a token's push once its ratio has left the band
in the advantage's direction.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def distillation_advantage(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, tokens: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """``(B, T)`` per-token advantage ``log p_teacher(y) - log p_student(y)`` of the sampled ``tokens`` (``(B, T)``)
    under both ``(B, T, V)`` logits divided by ``temperature``; no gradient."""
    index = tokens[..., None]
    log_t = F.log_softmax(teacher_logits.detach().float() / temperature, dim=-1).gather(-1, index)[..., 0]
    log_s = F.log_softmax(student_logits.detach().float() / temperature, dim=-1).gather(-1, index)[..., 0]
    return log_t - log_s


def proximal_distillation(
    logp: torch.Tensor, rollout_logp: torch.Tensor, advantage: torch.Tensor, mask: torch.Tensor, eps: float = 0.2
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(per_token, clipped)``, both ``(B, T)``: the clipped surrogate ``-min(r A, clip(r, 1 - eps, 1 + eps) A)``
    and where the clip binds (the gradient there is 0), 0 / False off ``mask``.

    Args:
        logp: the current policy's log-probabilities of the sampled tokens (with gradient), under the warping the
            sampler used.
        rollout_logp: the sampler's log-probabilities of the same tokens; NaN where unknown (the ratio is then 1,
            with ``logp``'s gradient: the on-policy update).
        advantage: the per-token advantage (``distillation_advantage``); its gradient is not taken.
        mask: 1 on the tokens the loss reads.
        eps: the clip range.
    """
    keep = mask.bool()
    logp = torch.where(keep, logp, torch.zeros_like(logp))  # off-mask positions may hold -inf under top-k/top-p
    old = torch.where(keep & ~torch.isnan(rollout_logp), rollout_logp, logp.detach())
    adv = torch.where(keep, advantage.detach(), torch.zeros_like(advantage))
    ratio = torch.exp(logp - old)
    bounded = ratio.clamp(1.0 - eps, 1.0 + eps)
    per_token = -torch.min(ratio * adv, bounded * adv)
    clipped = keep & (bounded * adv < ratio * adv)
    return torch.where(keep, per_token, torch.zeros_like(per_token)), clipped
