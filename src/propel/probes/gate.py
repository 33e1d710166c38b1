"""The exact RL reward of a probe, defined once: the probe logit gated by task validity.

``ProbeReward`` (what GRPO trains on), the sweep's RVP (what selects the probe) and ``RVPSelection`` all call
``gated_reward``, so a probe is selected on the reward the policy will actually be trained with.

The invalid floor must be the worst outcome: an invalid task that out-scores valid ones teaches the generator to be
invalid. ``default_floor`` is the one rule for it (below every member's recorded minimum logit); since on-policy
valid tasks can still score lower than anything in the pool, the hard gate lifts a valid task's reward to at least
the floor + ``VALID_MARGIN``, and ``check_floor`` measures how many valid samples needed that (the share under the
floor, not the mean: a mean can sit far above the floor while a third of the valid tasks sit under it).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

PROBE_MODES = ("hard_gate", "soft_gate", "probe_only")
"""``hard_gate``: valid -> logit (at least penalty + ``VALID_MARGIN``), invalid -> penalty (default); ``soft_gate``:
valid -> clipped probability, invalid -> penalty; ``probe_only``: the logit for every sample, validity ignored."""
VALID_MARGIN = 0.5
"""Least a valid task out-scores an invalid one under the hard gate: its reward is ``max(logit, floor + margin)``.
Half of ``MIN_MARGIN`` (the default floor's least distance below the pool minimum), so the clamp only lifts logits
well under anything the pool held, and a valid task always beats an invalid one by half a logit."""
MAX_BELOW = 0.1
"""Largest share of valid samples under the floor (+ margin) a ``FloorCheck`` accepts: past it the floor sits inside
the on-policy range (those tasks' rewards are clamped together, or beaten by invalid ones)."""


def floor_margin(mode: str) -> float:
    """The margin above the floor the gate lifts valid rewards to: ``VALID_MARGIN`` for the hard gate, else 0 (the
    soft gate's probabilities are bounded by its clip; ``probe_only`` has no floor)."""
    return VALID_MARGIN if mode == "hard_gate" else 0.0


def check_gate(mode: str, soft_clip: tuple[float, float]) -> tuple[float, float]:
    """Validate a gate's settings at construction time; returns ``soft_clip`` as a pair of floats."""
    if mode not in PROBE_MODES:
        raise ValueError(f"mode must be one of {PROBE_MODES}, got {mode!r}")
    low, high = (float(v) for v in soft_clip)
    if not 0.0 <= low <= high <= 1.0:
        raise ValueError(f"soft_clip must satisfy 0 <= low <= high <= 1, got {tuple(soft_clip)}")
    return low, high


@dataclass
class GateSpec:
    """How a probe's logit and a task's validity become the RL reward. One object: ``ProbeReward`` trains with it,
    the probe job's RVP selects with it (the pipeline copies the GRPO stage's), so a probe is selected on the reward
    the policy is trained with by construction."""

    mode: str = "hard_gate"
    """``hard_gate`` (valid -> logit, at least ``floor`` + ``VALID_MARGIN``; invalid -> ``floor``), ``soft_gate``
    (valid -> the calibrated probability clipped to ``soft_clip``; invalid -> ``floor``) or ``probe_only`` (the
    logit for every sample, validity ignored)."""
    floor: float | None = None
    """Reward of invalid samples in the gated modes; None: below every probe's recorded pool minimum logit
    (``default_floor``; ``soft_gate``: ``soft_clip[0] - 1``). Set 0 with ``soft_gate`` for no penalty."""
    soft_clip: tuple[float, float] = (0.0, 1.0)
    """(low, high) bounds of the soft gate's probability."""

    def __post_init__(self) -> None:
        self.soft_clip = check_gate(self.mode, self.soft_clip)
        if self.floor is not None:
            self.floor = float(self.floor)

    @property
    def margin(self) -> float:
        return floor_margin(self.mode)

    def floor_for(self, members: Sequence[Mapping[str, float] | None], names: Sequence[str] | None = None):
        """The floor in force for probes with these recorded quantiles: None in ``probe_only``, the given ``floor``,
        else ``default_floor``."""
        if self.mode == "probe_only":
            return None
        if self.floor is not None:
            return self.floor
        return default_floor(members, self.mode, self.soft_clip, names)


def needs_logit(valid: Tensor, mode: str = "hard_gate") -> Tensor:
    """Which samples' logits the reward reads (all in ``probe_only``, else the valid ones): score only those."""
    valid = torch.as_tensor(valid).bool()
    return torch.ones_like(valid) if mode == "probe_only" else valid


def gated_reward(logits: Tensor, valid: Tensor, gate: GateSpec, floor: float | None = None) -> Tensor:
    """Rewards [N] (float32) from probe logits [N] and validity [N] under ``gate``; ``floor``: the floor in force
    (``gate.floor_for``; defaults to ``gate.floor``).

    Logits where ``needs_logit`` is false are never read (they may be NaN: the probe need not score invalid tasks).
    The floor must be the worst outcome: the hard gate makes it so, lifting a valid task's logit to at least
    ``floor + VALID_MARGIN``.
    """
    mode, (low, high) = gate.mode, gate.soft_clip
    floor = gate.floor if floor is None else floor
    if floor is None and mode != "probe_only":
        raise ValueError("gated_reward needs a floor: pass gate.floor_for(...) or set gate.floor")
    logits = torch.as_tensor(logits).float().reshape(-1)
    valid = torch.as_tensor(valid).bool().reshape(-1)
    if logits.shape != valid.shape:
        raise ValueError(f"logits and valid differ in length: {logits.numel()} vs {valid.numel()}")
    if mode == "probe_only":
        return logits.clone()
    if mode == "soft_gate":
        score = torch.sigmoid(logits).clamp(low, high)
    else:
        score = logits.clamp(min=float(floor) + gate.margin)
    return torch.where(valid, score, torch.full_like(score, float(floor)))


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
                f"to {LEGACY_FLOOR}, which may sit above valid tasks' logits: re-export the probe or set the gate's "
                "floor",
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
    """The share of valid samples under the invalid floor, on one batch of samples."""

    mean_valid: float
    """Mean reward of the valid samples (NaN when there are none): logged, not judged."""
    floor: float
    """The reward invalid samples get."""
    below: float
    """Share of valid samples scoring at or below ``floor + margin`` (under the hard gate: those whose logit fell
    there, lifted to it by the clamp)."""
    n_valid: int
    margin: float = 0.0
    """What the reward's gate lifts valid rewards to above the floor (``floor_margin``)."""
    max_below: float = MAX_BELOW
    """Largest ``below`` that passes."""

    @property
    def ok(self) -> bool:
        """False when more than ``max_below`` of the valid samples sit under the floor (+ margin)."""
        return self.n_valid == 0 or self.below <= self.max_below

    def message(self, name: str = "reward") -> str:
        where = f"{self.floor:.3f}" + (f" + margin {self.margin:g}" if self.margin else "")
        return (
            f"{name}: {self.below:.0%} of {self.n_valid} valid samples score below the invalid floor {where} (more "
            f"than {self.max_below:.0%}; mean valid reward {self.mean_valid:.3f}), so the reward cannot rank them "
            "above invalid tasks: lower the gate's floor or leave it unset for the probe's default floor"
        )

    def metrics(self, prefix: str) -> dict[str, float]:
        return {f"{prefix}/mean_valid": self.mean_valid, f"{prefix}/floor": self.floor, f"{prefix}/below": self.below}


def check_floor(
    rewards: Tensor, valid: Tensor, floor: float, margin: float = 0.0, max_below: float = MAX_BELOW
) -> FloorCheck:
    """Compare the valid samples' rewards [N] (validity [N]) with ``floor + margin`` (``margin``: the reward's
    ``floor_margin``, 0 for a reward that does not clamp)."""
    r = torch.as_tensor(rewards).detach().double().flatten()
    v = torch.as_tensor(valid).bool().flatten()
    if r.shape != v.shape:
        raise ValueError(f"rewards and valid differ in length: {r.numel()} vs {v.numel()}")
    vr = r[v & torch.isfinite(r)]
    if vr.numel() == 0:
        return FloorCheck(math.nan, float(floor), 0.0, 0, float(margin), float(max_below))
    line = float(floor) + float(margin) + 1e-6  # float32 rewards lifted to exactly floor + margin count as under
    below = float((vr <= line).double().mean())
    return FloorCheck(float(vr.mean()), float(floor), below, int(vr.numel()), float(margin), float(max_below))
