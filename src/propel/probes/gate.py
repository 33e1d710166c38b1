"""The exact RL reward of a probe, defined once: the probe logit gated by task validity.

``ProbeReward`` (what GRPO trains on), the sweep's RVP (what selects the probe) and ``RVPSelection`` all call
``gated_reward``, so a probe is selected on the reward the policy will actually be trained with.
"""

from __future__ import annotations

import torch
from torch import Tensor

PROBE_MODES = ("hard_gate", "soft_gate", "probe_only")
"""``hard_gate``: valid -> logit, invalid -> penalty (default); ``soft_gate``: valid -> clipped probability,
invalid -> penalty; ``probe_only``: the logit for every sample, validity ignored."""


def check_gate(mode: str, soft_clip: tuple[float, float]) -> tuple[float, float]:
    """Validate a gate's settings at construction time; returns ``soft_clip`` as a pair of floats."""
    if mode not in PROBE_MODES:
        raise ValueError(f"mode must be one of {PROBE_MODES}, got {mode!r}")
    low, high = (float(v) for v in soft_clip)
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"soft_clip must satisfy 0 <= low <= high <= 1, got {tuple(soft_clip)}")
    return low, high


def needs_logit(valid: Tensor, mode: str = "hard_gate") -> Tensor:
    """Which samples' logits the reward reads (all in ``probe_only``, else the valid ones): score only those."""
    valid = torch.as_tensor(valid).bool()
    return torch.ones_like(valid) if mode == "probe_only" else valid


def gated_reward(
    logits: Tensor,
    valid: Tensor,
    mode: str = "hard_gate",
    invalid_penalty: float = -1.0,
    soft_clip: tuple[float, float] = (0.0, 1.0),
) -> Tensor:
    """Rewards [N] (float32) from probe logits [N] and validity [N].

    Logits where ``needs_logit`` is false are never read (they may be NaN: the probe need not score invalid tasks).
    The ``invalid_penalty`` must be the worst outcome: below the probe's logit range on valid tasks.
    """
    low, high = check_gate(mode, soft_clip)
    logits = torch.as_tensor(logits).float().reshape(-1)
    valid = torch.as_tensor(valid).bool().reshape(-1)
    if logits.shape != valid.shape:
        raise ValueError(f"logits and valid differ in length: {logits.numel()} vs {valid.numel()}")
    if mode == "probe_only":
        return logits.clone()
    score = torch.sigmoid(logits).clamp(low, high) if mode == "soft_gate" else logits
    return torch.where(valid, score, torch.full_like(score, float(invalid_penalty)))
