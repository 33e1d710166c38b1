"""Clipped policy-gradient losses for GRPO: ``grpo``, ``dr_grpo`` and ``dapo``, with KL anchor and IS correction.

All three share the PPO token objective ``-min(r * A, clip(r, 1 - eps_low, 1 + eps_high) * A)`` with
``r = exp(logp - old_logp)``; they differ only in how token losses are averaged:

* ``grpo``: mean over each sequence's tokens, then mean over sequences (short sequences weigh more per token). A
  sequence split over several rows (a step-wise agent episode) is one sequence: ``sequence_tokens`` gives each row
  the token count of its whole sequence and ``num_sequences`` counts sequences, not rows.
* ``dr_grpo``: sum over all tokens / (num_sequences * max_completion_length), a constant, so there is no length
  bias (Liu et al., "Understanding R1-Zero-like training").
* ``dapo``: sum over all tokens / number of tokens (token-level mean), with clip-higher (eps_high 0.28) and
  dual-clip (c = 3: a negative-advantage token's loss is bounded by ``-c * A`` however large ``r`` grows).

The KL anchor ``beta * KL(pi || pi_ref)`` is added per token before averaging, as in TRL.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from propel.losses.kl import KL_ESTIMATORS, kl_estimate

LOSS_TYPES = ("grpo", "dr_grpo", "dapo")


@dataclass
class LossSpec:
    """Which policy loss and its clipping / KL settings."""

    loss_type: str = "grpo"
    """One of ``grpo``, ``dr_grpo``, ``dapo``."""
    eps_low: float = 0.2
    """Lower clip range: the ratio is clipped at ``1 - eps_low``."""
    eps_high: float | None = None
    """Upper clip range; None means 0.28 for ``dapo`` (clip-higher) and ``eps_low`` otherwise."""
    dual_clip: float | None = None
    """Dual-clip bound c (> 1 + eps_high) for negative advantages; None: 3.0 for ``dapo``, else off; 0: off."""
    beta: float = 0.04
    """KL anchor coefficient (0 disables the reference forward)."""
    kl_estimator: str = "k3"
    """``k1``, ``k2`` or ``k3``."""
    max_completion_length: int | None = None
    """The ``dr_grpo`` constant; None uses the padded completion length of the batch."""

    def __post_init__(self) -> None:
        if self.loss_type not in LOSS_TYPES:
            raise ValueError(f"loss_type must be one of {LOSS_TYPES}, got {self.loss_type!r}")
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(f"kl_estimator must be one of {KL_ESTIMATORS}, got {self.kl_estimator!r}")
        if not 0 <= self.eps_low < 1:
            raise ValueError(f"eps_low must be in [0, 1), got {self.eps_low}")
        if self.beta < 0:
            raise ValueError(f"beta must be >= 0, got {self.beta}")
        c = self.clip_c
        if c is not None and c <= 1 + self.high:
            raise ValueError(f"dual_clip must exceed 1 + eps_high = {1 + self.high}, got {c}; use 0 to disable")

    @property
    def high(self) -> float:
        """Resolved upper clip range."""
        if self.eps_high is not None:
            return self.eps_high
        return 0.28 if self.loss_type == "dapo" else self.eps_low

    @property
    def clip_c(self) -> float | None:
        """Resolved dual-clip constant, or None when off."""
        if self.dual_clip is None:
            return 3.0 if self.loss_type == "dapo" else None
        return self.dual_clip or None


@dataclass
class PolicyLossOutput:
    """The differentiable loss and detached statistics for logging."""

    loss: torch.Tensor
    stats: dict[str, float] = field(default_factory=dict)


def truncated_importance_weights(
    trainer_logp: torch.Tensor, engine_logp: torch.Tensor, *, cap: float = 3.0, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-token ``min(exp(trainer_logp - engine_logp), cap)``, detached.

    Corrects for the rollout engine sampling from a slightly different distribution than the trainer computes
    (different kernels, precision, or vLLM): tokens are reweighted towards the trainer's old policy, truncated at
    ``cap`` to bound the variance (TIS, Yao et al. 2025; TRL's ``token_truncate``, cap 3.0). Padding and tokens whose
    engine logprob is unknown (NaN) get weight 1.
    """
    diff = (trainer_logp - engine_logp).detach()
    if mask is not None:
        diff = diff * mask
    diff = torch.nan_to_num(diff, nan=0.0)
    return torch.exp(diff).clamp(max=cap)


def _masked_mean(x: torch.Tensor, mask: torch.Tensor) -> float:
    return float((x * mask).sum() / mask.sum().clamp(min=1.0))


def _zero_masked(keep: torch.Tensor, *logps: torch.Tensor | None) -> list[torch.Tensor | None]:
    """Each logprob tensor (None stays None) with masked positions set to 0: padding and tool output may hold
    -inf under top-k/top-p warping (tokens the policy would never sample), and neither the loss nor its gradient
    may see a NaN."""
    return [None if x is None else torch.where(keep, x, torch.zeros_like(x)) for x in logps]


def _clipped_token_loss(
    ratio: torch.Tensor, adv: torch.Tensor, mask: torch.Tensor, spec: LossSpec
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(per_token, dual)``: the PPO clipped objective per token, with dual-clip when on, and where it bound."""
    clipped = torch.clamp(ratio, 1 - spec.eps_low, 1 + spec.high)
    per_token = -torch.min(ratio * adv, clipped * adv)
    c = spec.clip_c
    dual = torch.zeros_like(mask, dtype=torch.bool)
    if c is not None:
        bound = -c * adv  # the loss of a negative-advantage token may not exceed -c * A
        dual = (adv < 0) & (per_token > bound)
        per_token = torch.where(dual, bound.expand_as(per_token), per_token)
    return per_token, dual


def _kl_anchor(
    logp: torch.Tensor, ref_logp: torch.Tensor | None, mask: torch.Tensor, spec: LossSpec
) -> tuple[torch.Tensor, float]:
    """``(beta * KL per token, mean KL)``: the anchor added to each token's loss before averaging, as in TRL."""
    if ref_logp is None:
        raise ValueError("ref_logp is required when beta > 0 (the KL anchor); pass it or set beta=0")
    kl = kl_estimate(logp, ref_logp, spec.kl_estimator)
    return spec.beta * kl, _masked_mean(kl.detach(), mask)


def _aggregate(
    per_token: torch.Tensor,
    mask: torch.Tensor,
    spec: LossSpec,
    n_seq: int,
    num_tokens: float | None,
    sequence_tokens: torch.Tensor | None,
) -> torch.Tensor:
    """The batch loss from token losses, averaged as ``spec.loss_type`` says (see the module docstring)."""
    if spec.loss_type == "grpo":
        per_sequence = mask.sum(-1) if sequence_tokens is None else sequence_tokens.to(mask)
        return ((per_token * mask).sum(-1) / per_sequence.clamp(min=1.0)).sum() / n_seq
    if spec.loss_type == "dr_grpo":
        length = spec.max_completion_length or mask.shape[1]
        return (per_token * mask).sum() / (n_seq * length)
    return (per_token * mask).sum() / (num_tokens if num_tokens is not None else mask.sum().clamp(min=1.0))


def _clip_stats(
    ratio: torch.Tensor,
    adv: torch.Tensor,
    dual: torch.Tensor,
    mask: torch.Tensor,
    spec: LossSpec,
    is_weights: torch.Tensor | None,
) -> dict[str, float]:
    """Detached logging statistics: how often each clip bound, the mean ratio and the mean IS weight."""
    with torch.no_grad():
        low = (ratio < 1 - spec.eps_low) & (adv < 0)
        high = (ratio > 1 + spec.high) & (adv > 0)
        stats = {
            "clip_low": _masked_mean(low.float(), mask),
            "clip_high": _masked_mean(high.float(), mask),
            "clip_fraction": _masked_mean((low | high).float(), mask),
            "dual_clip_fraction": _masked_mean(dual.float(), mask),
            "ratio_mean": _masked_mean(ratio, mask),
        }
        if is_weights is not None:
            stats["is_weight_mean"] = _masked_mean(is_weights, mask)
    return stats


def policy_loss(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    spec: LossSpec,
    *,
    ref_logp: torch.Tensor | None = None,
    is_weights: torch.Tensor | None = None,
    num_sequences: int | None = None,
    num_tokens: float | None = None,
    sequence_tokens: torch.Tensor | None = None,
) -> PolicyLossOutput:
    """Loss over a ``(B, T)`` batch of completion tokens.

    Args:
        logp: current policy logprobs of the sampled tokens (with grad), ``(B, T)``.
        old_logp: logprobs under the policy that sampled (trainer-computed, detached), ``(B, T)``; equal to
            ``logp.detach()`` on the first PPO inner iteration.
        advantages: ``(B,)`` or ``(B, T)``.
        mask: 1 for completion tokens, 0 for padding, ``(B, T)``.
        spec: loss type and hyperparameters.
        ref_logp: reference logprobs, required when ``spec.beta > 0``.
        is_weights: optional truncated importance weights (see ``truncated_importance_weights``).
        num_sequences: sequences in the whole optimizer batch when it is split into micro-batches (grad
            accumulation): ``grpo`` and ``dr_grpo`` divide by it, so summing micro-batch gradients equals the
            full-batch gradient. Defaults to ``B``.
        num_tokens: same for ``dapo``: completion tokens in the whole batch. Defaults to ``mask.sum()``.
        sequence_tokens: ``(B,)`` for ``grpo``: the tokens each row's sequence mean is taken over, the whole
            sequence's when it spans several rows (``PackedBatch.episode_tokens``). Defaults to each row's own.
    """
    if logp.shape != old_logp.shape or logp.shape != mask.shape:
        raise ValueError(f"logp {tuple(logp.shape)}, old_logp {tuple(old_logp.shape)}, mask {tuple(mask.shape)} differ")
    mask = mask.to(logp.dtype)
    logp, old_logp, ref_logp = _zero_masked(mask > 0, logp, old_logp, ref_logp)
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 else advantages
    ratio = torch.exp(logp - old_logp)
    per_token, dual = _clipped_token_loss(ratio, adv, mask, spec)
    if is_weights is not None:
        per_token = per_token * is_weights
    stats: dict[str, float] = {}
    if spec.beta > 0:
        anchor, stats["kl"] = _kl_anchor(logp, ref_logp, mask, spec)
        per_token = per_token + anchor
    loss = _aggregate(per_token, mask, spec, num_sequences or logp.shape[0], num_tokens, sequence_tokens)
    stats.update(_clip_stats(ratio, adv, dual, mask, spec, is_weights))
    return PolicyLossOutput(loss=loss, stats=stats)
