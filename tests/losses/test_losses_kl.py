"""KL estimators: k3 matches TRL's formula, and k1/k3 are unbiased for the exact KL of two categoricals."""

from __future__ import annotations

import pytest
import torch

from propel.losses.kl import kl_estimate


def test_estimators_are_unbiased_against_exact_kl():
    g = torch.Generator().manual_seed(0)
    p = torch.softmax(torch.randn(6, generator=g, dtype=torch.float64), 0)
    q = torch.softmax(torch.randn(6, generator=g, dtype=torch.float64), 0)
    exact = float((p * (p.log() - q.log())).sum())
    # Expectation under p, computed exactly by enumerating the support.
    for kind in ("k1", "k3"):
        expected = float((p * kl_estimate(p.log(), q.log(), kind)).sum())
        assert expected == pytest.approx(exact, rel=1e-10)
    assert float((p * kl_estimate(p.log(), q.log(), "k2")).sum()) > 0


def test_k3_matches_trl_and_is_nonnegative():
    logp, ref = torch.randn(4, 5), torch.randn(4, 5)
    trl = torch.exp(ref - logp) - (ref - logp) - 1  # TRL 1.16 grpo_trainer.py _compute_loss, per_token_kl
    torch.testing.assert_close(kl_estimate(logp, ref), trl)
    assert (kl_estimate(logp, ref) >= 0).all()
    with pytest.raises(ValueError, match="k1"):
        kl_estimate(logp, ref, "k9")
