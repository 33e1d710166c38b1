"""Distillation divergences between a student's and a teacher's next-token distributions, per token.

Three divergences, in GKD's convention (``beta`` is the teacher's weight in the mixture): ``forward_kl``
KL(teacher || student) (mode-covering: the student learns everything the teacher would say), ``reverse_kl``
KL(student || teacher) (mode-seeking, as on-policy distillation uses) and ``jsd``, the generalized Jensen-Shannon
divergence ``beta * KL(teacher || m) + (1 - beta) * KL(student || m)`` with ``m = beta * teacher + (1 - beta) *
student``. Either over the full vocabulary or over the teacher's top-k tokens plus one tail bucket holding the rest
of the vocabulary's mass, for both distributions (``K + 1`` categories, as TRL's SDPO ``distillation_add_tail`` and
its server distillation do). The tail is kept, not renormalised away: over the top-k alone a student that moves mass
to tokens outside the teacher's top-k, in proportion, would score as unchanged and never be pulled back. Per-token
values can be clipped from above, so a few tokens the teacher finds very unlikely cannot dominate a step.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from propel.errors import ConfigError

DIVERGENCES = ("forward_kl", "reverse_kl", "jsd")


@dataclass
class DivergenceSpec:
    """Which divergence, over which tokens, how warped and clipped."""

    kind: str = "forward_kl"
    """``forward_kl``, ``reverse_kl`` or ``jsd``."""
    beta: float = 0.5
    """The teacher's weight in the ``jsd`` mixture (0 would be forward KL, 1 reverse KL)."""
    top_k: int = 0
    """Compare over the teacher's top-k tokens and one tail bucket for all the others (0: the full vocabulary)."""
    clip: float | None = None
    """Upper bound on a token's divergence (None: no clipping); a clipped token passes no gradient."""

    def __post_init__(self) -> None:
        if self.kind not in DIVERGENCES:
            raise ConfigError(f"divergence must be one of {DIVERGENCES}, got {self.kind!r}")
        if self.kind == "jsd" and not 0.0 < self.beta < 1.0:
            raise ConfigError(f"jsd needs 0 < beta < 1 (0 and 1 are forward_kl and reverse_kl), got {self.beta}")
        if self.top_k < 0:
            raise ConfigError(f"top_k must be >= 0, got {self.top_k}")
        if self.clip is not None and not self.clip > 0:
            raise ConfigError(f"clip must be > 0 or None, got {self.clip}")


def _kl(log_p: torch.Tensor, log_q: torch.Tensor) -> torch.Tensor:
    """KL(p || q) over the last dimension, from log-probabilities of finite logits."""
    return F.kl_div(log_q, log_p, reduction="none", log_target=True).sum(-1)


def token_divergence(
    student_logits: torch.Tensor, teacher_logits: torch.Tensor, spec: DivergenceSpec, temperature: float = 1.0
) -> torch.Tensor:
    """Per-position divergence, ``(...,)`` from ``(..., V)`` logits (fp32; the teacher's side carries no gradient
    when its logits were computed without one). ``temperature`` divides both sets of logits first."""
    log_s = F.log_softmax(student_logits.float() / temperature, dim=-1)
    log_t = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    if 0 < spec.top_k < log_t.shape[-1]:
        log_s, log_t = top_k_with_tail(log_s, log_t, spec.top_k)
    if spec.kind == "forward_kl":
        out = _kl(log_t, log_s)
    elif spec.kind == "reverse_kl":
        out = _kl(log_s, log_t)
    else:
        log_m = torch.logaddexp(log_t + math.log(spec.beta), log_s + math.log1p(-spec.beta))
        out = spec.beta * _kl(log_t, log_m) + (1 - spec.beta) * _kl(log_s, log_m)
    if spec.clip is not None:
        out = out.clamp(max=spec.clip)
    return out


def top_k_with_tail(log_s: torch.Tensor, log_t: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(..., k + 1)`` log-probabilities of the teacher's top-k tokens and, last, of all other tokens together (the
    tail), for the student and the teacher, from ``(..., V)`` log-probabilities. The tail is the exact log-sum of
    the other tokens' probabilities (TRL computes ``log(1 - top-k mass)``, clamped; the same value where that is
    not 0)."""
    index = log_t.topk(k, dim=-1).indices
    outside = torch.ones_like(log_t, dtype=torch.bool).scatter(-1, index, False)

    def with_tail(log_p: torch.Tensor) -> torch.Tensor:
        tail = log_p.masked_fill(~outside, float("-inf")).logsumexp(-1, keepdim=True)
        return torch.cat([log_p.gather(-1, index), tail], dim=-1)

    return with_tail(log_s), with_tail(log_t)


def masked_mean(values: torch.Tensor, mask: torch.Tensor, count: float | None = None) -> torch.Tensor:
    """Sum of ``values`` where ``mask`` is 1, over ``count`` (default: the mask's sum; at least 1)."""
    mask = mask.to(values.dtype)
    total = (values * mask).sum()
    return total / max(float(mask.sum()) if count is None else count, 1.0)
