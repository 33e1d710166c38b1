"""The exact RL reward of a probe, defined once: the probe logit gated by task validity.

``ProbeReward`` (what GRPO trains on), the sweep's RVP (what selects the probe) and ``RVPSelection`` all call
``gated_reward``, so a probe is selected on the reward the policy will actually be trained with.

The invalid floor must be the worst outcome: an invalid task that out-scores valid ones teaches the generator to be
invalid. ``default_floor`` is the one rule for it (below every member's recorded minimum logit), and ``check_floor``
is the one test that the rule held on real samples.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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


QUANTILES = (0.0, 0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99, 1.0)
"""Quantile levels an artifact records of its logits on the training pool (keys ``min``, ``q01``, ..., ``max``)."""
LEGACY_FLOOR = -1.0
"""The fixed floor of probes that recorded no logit quantiles (artifacts written before they were recorded)."""
MIN_MARGIN = 1.0
"""Smallest gap between the default floor and the lowest recorded logit."""


def _key(q: float) -> str:
    return "min" if q == 0.0 else "max" if q == 1.0 else f"q{round(q * 100):02d}"


def logit_quantiles(logits: Tensor) -> dict[str, float]:
    """Quantiles (``QUANTILES``) of a probe's logits on its pool, plus ``n``: what ``default_floor`` reads."""
    x = torch.as_tensor(logits).detach().double().flatten()
    x = x[torch.isfinite(x)]
    if x.numel() == 0:
        raise ValueError("logits: need at least one finite logit to record quantiles")
    values = torch.quantile(x, torch.tensor(QUANTILES, dtype=torch.float64))
    return {"n": int(x.numel()), **{_key(q): float(v) for q, v in zip(QUANTILES, values, strict=True)}}


def member_floor(quantiles: Mapping[str, float], min_margin: float = MIN_MARGIN) -> float:
    """One probe's floor: its minimum pool logit minus one interquartile range (at least ``min_margin``).

    The pool minimum bounds the valid range seen in training; the margin leaves room for on-policy tasks that score
    a little lower than anything in the pool, scaled to the probe's own spread of logits.
    """
    spread = float(quantiles["q75"]) - float(quantiles["q25"])
    return float(quantiles["min"]) - max(min_margin, spread)


def default_floor(
    members: Sequence[Mapping[str, float] | None],
    mode: str = "hard_gate",
    soft_clip: tuple[float, float] = (0.0, 1.0),
    names: Sequence[str] | None = None,
    min_margin: float = MIN_MARGIN,
) -> float:
    """The invalid floor when none is given: below every member's valid range (ensembles and constraints included).

    ``hard_gate``: the minimum over members of ``member_floor`` (a min-combined score can reach any member's
    minimum). ``soft_gate``: one below the lowest clipped probability. A member with no recorded quantiles (None)
    falls back to ``LEGACY_FLOOR`` with a warning naming it (``names``).
    """
    low, _ = check_gate(mode, soft_clip)
    if mode == "soft_gate":
        return low - 1.0
    floors = []
    for i, q in enumerate(members):
        if q is None or "min" not in q:
            name = names[i] if names is not None else f"probe {i}"
            warnings.warn(
                f"{name}: no logit quantiles recorded (an artifact written before they were); its floor falls back "
                f"to {LEGACY_FLOOR}, which may sit above valid tasks' logits: re-export the probe or set "
                "invalid_penalty",
                stacklevel=2,
            )
            floors.append(LEGACY_FLOOR)
        else:
            floors.append(member_floor(q, min_margin))
    if not floors:
        raise ValueError("default_floor: no probe to take the floor from")
    return min(floors)


@dataclass(frozen=True)
class FloorCheck:
    """Mean reward of valid samples against the invalid floor, on one batch of samples."""

    mean_valid: float
    """Mean reward of the valid samples (NaN when there are none)."""
    floor: float
    """The reward invalid samples get."""
    below: float
    """Share of valid samples scoring at or below the floor."""
    n_valid: int

    @property
    def ok(self) -> bool:
        """False when valid samples score, on average, no better than invalid ones."""
        return self.n_valid == 0 or self.mean_valid > self.floor

    def message(self, name: str = "reward") -> str:
        return (
            f"{name}: valid samples score below the invalid floor (mean valid reward {self.mean_valid:.3f} <= floor "
            f"{self.floor:.3f}; {self.below:.0%} of {self.n_valid} valid samples at or below it), so being invalid "
            "pays better than being valid: lower invalid_penalty or leave it unset for the probe's default floor"
        )

    def metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}/mean_valid": self.mean_valid, f"{prefix}/floor": self.floor, f"{prefix}/below": self.below}


def check_floor(rewards: Tensor, valid: Tensor, floor: float) -> FloorCheck:
    """Compare the valid samples' rewards [N] (validity [N]) with ``floor``."""
    r = torch.as_tensor(rewards).detach().double().flatten()
    v = torch.as_tensor(valid).bool().flatten()
    if r.shape != v.shape:
        raise ValueError(f"rewards and valid differ in length: {r.numel()} vs {v.numel()}")
    vr = r[v & torch.isfinite(r)]
    if vr.numel() == 0:
        return FloorCheck(math.nan, float(floor), 0.0, 0)
    return FloorCheck(float(vr.mean()), float(floor), float((vr <= floor).double().mean()), int(vr.numel()))
