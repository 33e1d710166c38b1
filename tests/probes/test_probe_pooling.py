"""Pooling rules against a per-row reference on unpadded slices, for left, right and gappy masks."""

import pytest
import torch

from propel.probes.pooling import POOLINGS, pool, pool_turns, pooled_dim


def reference_pool(h: torch.Tensor, pooling: str) -> torch.Tensor:
    """Pool one unpadded sequence [n, D] the obvious way."""
    n = h.shape[0]
    if pooling == "last_token":
        return h[-1]
    if pooling == "mean_full":
        return h.mean(0)
    if pooling.startswith("mean_last_") and pooling[10:].isdigit():
        return h[-int(pooling[10:]) :].mean(0)
    if pooling == "mean_last_half":
        return h[n - (n + 1) // 2 :].mean(0)
    if pooling == "max":
        return h.max(0).values
    if pooling == "first_last_concat":
        return torch.cat([h[0], h[-1]])
    if pooling == "mean_std_concat":
        return torch.cat([h.mean(0), h.std(0, correction=0)])
    raise AssertionError(pooling)


def padded_batch(lengths, dim=6, total=60, side="right", seed=0):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(len(lengths), total, dim, generator=g)
    mask = torch.zeros(len(lengths), total, dtype=torch.long)
    for i, n in enumerate(lengths):
        if side == "right":
            mask[i, :n] = 1
        else:
            mask[i, total - n :] = 1
    return h, mask


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("pooling", POOLINGS)
def test_pool_matches_unpadded_reference(pooling, side):
    lengths = [1, 2, 3, 7, 51, 60]
    h, mask = padded_batch(lengths, side=side)
    got = pool(h, mask, pooling)
    assert got.shape == (len(lengths), pooled_dim(pooling, h.shape[-1]))
    assert got.dtype == torch.float32
    for i in range(len(lengths)):
        want = reference_pool(h[i][mask[i].bool()], pooling)
        torch.testing.assert_close(got[i], want, rtol=1e-5, atol=1e-6)


def test_pool_upcasts_half_precision_and_ignores_padding_values():
    h, mask = padded_batch([3, 5], side="left")
    h = h.bfloat16()
    poisoned = h.clone()
    poisoned[~mask.bool()] = 1e4  # padding content must not leak into any pooling
    for p in POOLINGS:
        out = pool(poisoned, mask, p)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out, pool(h, mask, p))


def test_pool_rejects_empty_rows_and_unknown_names():
    h, mask = padded_batch([3, 1])
    mask[1] = 0
    with pytest.raises(ValueError, match="at least one valid token"):
        pool(h, mask, "mean_full")
    with pytest.raises(ValueError, match="pooling"):
        pool(h, torch.ones(2, 60), "median")


def test_pool_turns():
    turns = torch.tensor([[1.0, 5.0], [3.0, -1.0], [2.0, 0.0]])
    torch.testing.assert_close(pool_turns(turns, "mean"), torch.tensor([2.0, 4.0 / 3]))
    torch.testing.assert_close(pool_turns(turns, "last"), torch.tensor([2.0, 0.0]))
    torch.testing.assert_close(pool_turns(turns, "max"), torch.tensor([3.0, 5.0]))
    with pytest.raises(ValueError, match="trajectory_pooling"):
        pool_turns(turns, "sum")
