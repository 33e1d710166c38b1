"""GRPO group-relative advantages: each completion's reward relative to the other completions of its prompt."""

from __future__ import annotations

import torch

SCALES = ("group", "batch", "none")


def _grouped(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    if rewards.dim() != 1:
        raise ValueError(f"rewards must be 1-D (one per completion), got shape {tuple(rewards.shape)}")
    if group_size < 1 or rewards.numel() % group_size:
        raise ValueError(f"group_size={group_size} must divide the number of rewards ({rewards.numel()})")
    return (rewards if rewards.is_floating_point() else rewards.float()).view(-1, group_size)


def group_advantages(
    rewards: torch.Tensor,
    group_size: int,
    *,
    scale: str = "group",
    eps: float = 1e-4,
    mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean-centred rewards per group, optionally divided by a standard deviation.

    Rewards are laid out group after group (``group_size`` consecutive completions share a prompt), as TRL does.
    The std is Bessel-corrected and ``eps`` is added to it (TRL's ``1e-4``) so a zero-variance group gives zeros.

    Args:
        rewards: shape ``(num_groups * group_size,)``.
        group_size: completions per prompt (G).
        scale: ``"group"`` (std within the group, GRPO), ``"batch"`` (one std over the batch) or ``"none"``
            (Dr. GRPO: no std scaling, which removes the question-difficulty bias).
        eps: added to the std before dividing.
        mask: ``(num_groups * group_size,)`` bool, False for rollouts left out (infrastructure failures, samples no
            reward could judge): they get advantage 0 and the statistics of their group come from the others alone
            (a group with fewer than two left gives zeros). A reward that is NaN or infinite is left out whatever
            the mask says, so it never reaches an advantage. With every reward finite and kept the result is the
            unmasked one, bit for bit; with ``group`` or ``none`` scaling, so is every whole group's beside groups
            that lose samples.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    finite = torch.isfinite(rewards)
    if mask is not None or not bool(finite.all()):
        keep = finite if mask is None else finite & mask.to(finite.device).bool()
        if not bool(keep.all()):
            grouped, kept = _grouped(rewards, group_size), _grouped(keep, group_size).bool()
            out = _masked_advantages(grouped, kept, scale, eps).view(-1, group_size)
            whole = kept.all(dim=1)
            if scale != "batch" and bool(whole.any()):  # a whole group's advantages do not depend on the others'
                out[whole] = _group_scaled(grouped[whole], scale, eps)
            return out.reshape(-1)
    grouped = _grouped(rewards, group_size)
    if scale != "batch":
        return _group_scaled(grouped, scale, eps).reshape(-1)
    centred = (grouped - grouped.mean(dim=1, keepdim=True)).reshape(-1)
    std = grouped.reshape(-1).std().expand_as(centred) if rewards.numel() > 1 else None
    if std is None:
        return torch.zeros_like(centred)
    return centred / (std + eps)


def _group_scaled(grouped: torch.Tensor, scale: str, eps: float) -> torch.Tensor:
    """``(groups, group_size)`` advantages of whole groups: centred, and for ``group`` divided by the group's std."""
    centred = grouped - grouped.mean(dim=1, keepdim=True)
    if scale == "none":
        return centred
    if grouped.shape[1] < 2:
        return torch.zeros_like(centred)
    return centred / (grouped.std(dim=1, keepdim=True) + eps)


def _masked_centred(grouped: torch.Tensor, keep: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Rewards minus their group's mean over the kept entries (0 where left out, whatever value they hold: a NaN
    left out stays out), and the kept count per group."""
    keep = keep.bool()
    grouped = torch.where(keep, grouped, torch.zeros((), dtype=grouped.dtype, device=grouped.device))
    count = keep.sum(dim=1, keepdim=True)
    mean = grouped.sum(dim=1, keepdim=True) / count.clamp(min=1)
    return (grouped - mean) * keep, count


def _masked_advantages(grouped: torch.Tensor, keep: torch.Tensor, scale: str, eps: float) -> torch.Tensor:
    """``group_advantages`` over the kept entries only (the same formulas, with counts instead of sizes)."""
    centred, count = _masked_centred(grouped, keep)
    centred = centred.masked_fill(count < 2, 0.0)
    if scale == "none":
        return centred.reshape(-1)
    if scale == "group":
        var = (centred**2).sum(dim=1, keepdim=True) / (count - 1).clamp(min=1)
        return (centred / (var.sqrt() + eps)).reshape(-1)
    flat, kept = grouped.reshape(-1), keep.reshape(-1).bool()
    std = flat[kept].std() if int(kept.sum()) > 1 else None
    return torch.zeros_like(flat) if std is None else centred.reshape(-1) / (std + eps)


def zero_variance_mask(
    rewards: torch.Tensor, group_size: int, *, tol: float = 1e-6, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Per-completion bool mask, True where the completion's group has (numerically) zero reward variance.

    Such groups give all-zero advantages, so they carry no policy gradient (only KL) and can be dropped.
    ``tol`` makes the test robust to float noise (e.g. probe logits of identical texts computed in different
    batches differ in the last bits). With ``mask``, only the kept entries count (a group with fewer than two is
    zero-variance); a NaN or infinite reward counts as left out.
    """
    grouped = _grouped(rewards, group_size)
    finite = torch.isfinite(rewards)
    if not bool(finite.all()):
        mask = finite if mask is None else finite & mask.bool()
    if mask is None or bool(mask.all()):
        std = grouped.std(dim=1, unbiased=False)
    else:
        centred, count = _masked_centred(grouped, _grouped(mask, group_size))
        std = (centred**2).sum(dim=1, keepdim=True).div(count.clamp(min=1)).sqrt().masked_fill(count < 2, 0.0)
        std = std.squeeze(1)
    return (std < tol).repeat_interleave(group_size)


def within_valid_share(
    rewards: torch.Tensor, valid: torch.Tensor, group_size: int, mask: torch.Tensor | None = None
) -> float | None:
    """The share of a step's advantage variance that comes from reward differences *among valid samples*, against
    validity (valid vs invalid): per group with reward variance, the within-valid sum of squares over the group's
    total sum of squares, averaged over those groups (group-scaled advantages weigh every group alike). 0 when only
    the gate separates samples, 1 when all samples are valid and the rest of the reward (a probe) ranks them; None
    when no group has variance. ``mask`` (and any NaN or infinite reward) leaves samples out, as the advantages do."""
    keep = torch.isfinite(rewards) if mask is None else torch.isfinite(rewards) & mask.bool()
    grouped, kept = _grouped(rewards.double(), group_size), _grouped(keep.double(), group_size)
    grouped = torch.where(kept.bool(), grouped, torch.zeros((), dtype=grouped.dtype))
    ok = _grouped(valid.double(), group_size) * kept
    mean = grouped.sum(1, keepdim=True) / kept.sum(1, keepdim=True).clamp(min=1)
    total = (((grouped - mean) * kept) ** 2).sum(1)
    n_valid = ok.sum(1)
    valid_mean = (grouped * ok).sum(1) / n_valid.clamp(min=1)
    within = (((grouped - valid_mean[:, None]) ** 2) * ok).sum(1)
    has = total > 1e-12
    return float((within[has] / total[has]).mean()) if has.any() else None
