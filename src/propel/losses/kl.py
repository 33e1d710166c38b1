"""Per-token KL(pi || pi_ref) estimators from sampled-token logprobs (Schulman, "Approximating KL divergence").

With ``d = ref_logp - logp`` on tokens sampled from pi: k1 = -d (unbiased, high variance, can be negative),
k2 = d**2 / 2 (biased, low variance), k3 = exp(d) - d - 1 (unbiased, low variance, always >= 0; GRPO's choice).
"""

from __future__ import annotations

import torch

KL_ESTIMATORS = ("k1", "k2", "k3")


def kl_estimate(logp: torch.Tensor, ref_logp: torch.Tensor, kind: str = "k3") -> torch.Tensor:
    """Elementwise KL estimate for tokens sampled from the policy; same shape as ``logp``."""
    d = ref_logp - logp
    if kind == "k3":
        return torch.exp(d) - d - 1
    if kind == "k2":
        return 0.5 * d.pow(2)
    if kind == "k1":
        return -d
    raise ValueError(f"kl estimator must be one of {KL_ESTIMATORS}, got {kind!r}")
