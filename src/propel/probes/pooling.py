"""Pool a padded batch of hidden states into one vector per sequence, and pool per-turn vectors across a trajectory.

Every rule works from the attention mask alone (each valid token's rank among the row's valid tokens), so left
padding, right padding and even gaps give the same result as pooling the unpadded sequence. Pooling runs in fp32.
"""

from __future__ import annotations

import torch
from torch import Tensor

POOLINGS = (
    "last_token",
    "mean_full",
    "mean_last_50",
    "mean_last_5",
    "mean_last_3",
    "mean_last_half",
    "max",
    "first_last_concat",
    "mean_std_concat",
)
TRAJECTORY_POOLINGS = ("mean", "last", "max")


def check_poolings(poolings, allowed=POOLINGS, field: str = "poolings") -> tuple[str, ...]:
    """Validate pooling names up front, naming the field and the allowed values."""
    if isinstance(poolings, str):
        poolings = (poolings,)
    bad = [p for p in poolings if p not in allowed]
    if bad or not poolings:
        raise ValueError(f"{field}: unknown pooling {bad or '(empty)'}; choose from {', '.join(allowed)}")
    return tuple(poolings)


def pooled_dim(pooling: str, hidden_size: int) -> int:
    """Width of a pooled vector: the two concat rules double the hidden size."""
    return 2 * hidden_size if pooling in ("first_last_concat", "mean_std_concat") else hidden_size


def _masked_mean(h: Tensor, m: Tensor) -> Tensor:
    w = m.to(h.dtype).unsqueeze(-1)
    return (h * w).sum(1) / w.sum(1).clamp(min=1.0)


def _take(h: Tensor, sel: Tensor) -> Tensor:
    """The one position per row where ``sel`` is true."""
    idx = sel.to(torch.long).argmax(dim=1)
    return h[torch.arange(h.shape[0], device=h.device), idx]


def pool(hidden: Tensor, attention_mask: Tensor, pooling: str) -> Tensor:
    """Pool ``hidden`` [B, T, D] over the valid tokens of ``attention_mask`` [B, T] into fp32 [B, D or 2D].

    ``mean_last_k`` averages the last k valid tokens (all of them when the row is shorter), ``mean_last_half`` the
    last ceil(n/2); ``mean_std_concat`` uses the population std (defined for one-token rows).
    """
    h = hidden.float()
    m = attention_mask.bool()
    if not bool(m.any(dim=1).all()):
        raise ValueError("attention_mask: every row needs at least one valid token (got an empty sequence)")
    n = m.sum(dim=1, keepdim=True)
    rank = m.long().cumsum(dim=1) - 1  # rank of each valid token among its row's valid tokens
    last = m & (rank == n - 1)
    if pooling == "last_token":
        return _take(h, last)
    if pooling == "mean_full":
        return _masked_mean(h, m)
    if pooling.startswith("mean_last_") and pooling[len("mean_last_") :].isdigit():
        k = int(pooling[len("mean_last_") :])
        return _masked_mean(h, m & (rank >= n - k))
    if pooling == "mean_last_half":
        half = (n + 1) // 2
        return _masked_mean(h, m & (rank >= n - half))
    if pooling == "max":
        return h.masked_fill(~m.unsqueeze(-1), float("-inf")).amax(dim=1)
    if pooling == "first_last_concat":
        return torch.cat([_take(h, m & (rank == 0)), _take(h, last)], dim=-1)
    if pooling == "mean_std_concat":
        mean = _masked_mean(h, m)
        var = _masked_mean((h - mean.unsqueeze(1)) ** 2, m)
        return torch.cat([mean, var.sqrt()], dim=-1)
    raise ValueError(f"pooling: unknown {pooling!r}; choose from {', '.join(POOLINGS)}")


def pool_turns(turns: Tensor, rule: str) -> Tensor:
    """Aggregate per-turn vectors [turns, D] of one trajectory into one vector [D] (mean, last or max)."""
    if turns.ndim != 2 or turns.shape[0] == 0:
        raise ValueError(f"trajectory: expected at least one turn of shape [turns, D], got {tuple(turns.shape)}")
    if rule == "mean":
        return turns.mean(0)
    if rule == "last":
        return turns[-1]
    if rule == "max":
        return turns.amax(0)
    raise ValueError(f"trajectory_pooling: unknown {rule!r}; choose from {', '.join(TRAJECTORY_POOLINGS)}")
