"""Which samples a GRPO step can learn from: those its reward judged, in groups that still compare two of them.

A reward component that cannot judge a sample (a TRL function's None, a grader that could not run, a reward that
raised) says so with NaN (``propel.rewards.combine``). Counting such a sample 0 gives it a real advantage: in a group
of failures it looks average, in a group of penalised samples it looks best. So a sample enters its group's
statistics and the loss only when its reward means the same thing as its group-mates':

- some *paying* component (weight != 0; all of them when none pays) judged it, and
- every paying component that judged any sample of its group judged it too: a sample that made a penalty unable to
  judge it is not compared, penalty-free, with the mates that penalty judged (TRL sums what each completion was
  judged by, so there it would score as if the penalty were 0).

A group left with fewer than two such samples has no relative signal: it is skipped (out of the loss) and counted.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def judged(parts: torch.Tensor, weights: Sequence[float], group_size: int) -> torch.Tensor:
    """Per sample, whether its reward is comparable with its group-mates' (see the module docstring).

    Args:
        parts: ``(num_samples, num_components)``, each component's value, NaN where it did not judge the sample
            (an infinite value counts as not judged).
        weights: each component's weight in the sum.
        group_size: consecutive samples that share a prompt.

    Returns:
        ``(num_samples,)`` bool.
    """
    if parts.dim() != 2 or parts.shape[1] != len(weights):
        raise ValueError(f"parts must be (samples, {len(weights)} components), got shape {tuple(parts.shape)}")
    if group_size < 1 or parts.shape[0] % group_size:
        raise ValueError(f"group_size={group_size} must divide the number of samples ({parts.shape[0]})")
    paying = torch.tensor([float(w) != 0.0 for w in weights], dtype=torch.bool)
    if not bool(paying.any()):
        paying = torch.ones_like(paying)
    seen = torch.isfinite(parts[:, paying]).view(-1, group_size, int(paying.sum()))
    asked = seen.any(dim=1, keepdim=True)  # (groups, 1, paying): the components that judged someone in the group
    ok = (seen | ~asked).all(dim=2) & seen.any(dim=2)
    return ok.reshape(-1)


def learnable(keep: torch.Tensor, group_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``keep`` restricted to groups that keep at least two samples, and which groups were skipped (fewer than two).

    Args:
        keep: ``(num_samples,)`` bool, the samples judged and not lost to an infrastructure failure.
        group_size: consecutive samples that share a prompt.

    Returns:
        ``(num_samples,)`` bool and ``(num_groups,)`` bool.
    """
    if keep.dim() != 1 or group_size < 1 or keep.numel() % group_size:
        raise ValueError(f"keep must be 1-D with a multiple of group_size={group_size} entries, got {keep.shape}")
    counts = keep.bool().view(-1, group_size).sum(dim=1)
    skipped = counts < 2
    return keep.bool() & ~skipped.repeat_interleave(group_size), skipped
