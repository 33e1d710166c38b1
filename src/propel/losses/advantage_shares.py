"""Each reward component's share of a step's advantage variance: which component actually steers the policy.

A combined reward is ``R = sum_c x_c`` with ``x_c = w_c * r_c`` (a component that did not judge a sample adds 0
there, as in the sum). GRPO's advantage is ``R`` minus its group's mean, divided by the group's standard deviation
(scale ``group``) or by one number for the whole batch (``batch``, ``none``), so what moves the policy is the
variance of ``R`` within groups, and it splits exactly by component (covariance is linear in its first argument):

    Var_g(R) = sum_c Cov_g(x_c, R)          within group g, over its samples in the loss

Component c's share of the advantage variance is

    share_c = sum_g a_g Cov_g(x_c, R) / sum_g a_g Var_g(R)

over the groups with variance, with ``a_g = 1 / Var_g(R)`` for group scaling (each group's advantages have unit
variance, so every group counts alike: the share is the mean of the groups' ratios) and ``a_g = 1`` otherwise (the
groups pooled). The shares sum to 1. One can be negative (a component that pulls against the total, e.g. a penalty
firing on the samples the rest rewards) or above 1 (when another is negative); a component that is constant within
every group has share 0, whatever its mean: a large reward that never differs between a prompt's completions
teaches nothing.
"""

from __future__ import annotations

import torch

from propel.losses.advantages import SCALES


def advantage_shares(
    contributions: torch.Tensor,
    group_size: int,
    keep: torch.Tensor | None = None,
    scale: str = "group",
    tol: float = 1e-12,
) -> torch.Tensor | None:
    """Each component's share of the within-group variance of the total (the module docstring's ``share_c``).

    Args:
        contributions: ``(num_samples, num_components)``, each component's weighted value ``w_c * r_c``; NaN (not
            judged) counts 0, as in the total.
        group_size: consecutive samples that share a prompt.
        keep: ``(num_samples,)`` bool, the samples in the loss (None: all).
        scale: the advantages' scaling (``group``, ``batch`` or ``none``).
        tol: a group whose total's sum of squares is at most this has no variance and is left out.

    Returns:
        ``(num_components,)`` float64 shares summing to 1, or None when no group has variance.
    """
    if scale not in SCALES:
        raise ValueError(f"scale must be one of {SCALES}, got {scale!r}")
    if contributions.dim() != 2 or group_size < 1 or contributions.shape[0] % group_size:
        raise ValueError(
            f"contributions must be (samples, components) with a multiple of group_size={group_size} samples, got "
            f"{tuple(contributions.shape)}"
        )
    x = torch.nan_to_num(contributions.double(), nan=0.0, posinf=0.0, neginf=0.0)
    n, c = x.shape
    kept = torch.ones(n, dtype=torch.bool) if keep is None else keep.bool().cpu()
    w = kept.double().view(-1, group_size, 1)
    x = x.view(-1, group_size, c) * w
    total = x.sum(dim=2, keepdim=True)
    count = w.sum(dim=1, keepdim=True).clamp(min=1)
    dx = (x - x.sum(dim=1, keepdim=True) / count) * w
    dr = (total - total.sum(dim=1, keepdim=True) / count) * w
    var = (dr**2).sum(dim=(1, 2))  # (groups,)
    cov = (dx * dr).sum(dim=1)  # (groups, components)
    has = var > tol
    if not bool(has.any()):
        return None
    a = torch.where(has, 1.0 / var.clamp(min=tol), torch.zeros_like(var)) if scale == "group" else has.double()
    return (a[:, None] * cov).sum(dim=0) / (a * var).sum()
