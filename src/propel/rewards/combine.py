"""Weighted sum of named reward components, keeping each component for logging."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from propel.rewards.reward import RewardComponent, RewardContext
from propel.rollouts.record import Sample


@dataclass
class RewardBreakdown:
    """Total reward per sample and each component's unweighted value."""

    total: torch.Tensor
    components: dict[str, torch.Tensor]
    extras: dict[str, float] = field(default_factory=dict)
    """Per-step figures: each component's wall time (``<name>/seconds``), the signal cost per sample
    (``seconds_per_sample``, all components) and what components report with ``step_stats()`` (``<name>/<key>``),
    e.g. a solver-trial count."""
    logged: dict[str, torch.Tensor] = field(default_factory=dict)
    """Per-sample values logged beside the components and never paid, ``<name>_<key>`` for what a component reports
    with ``logged_values()`` (e.g. ``format_raw``: a gated style component's ungated measure)."""

    def stats(self, prefix: str = "reward") -> dict[str, float]:
        """Mean and std of the total, of every component and of every logged value, for ``log_dict``."""
        out = {f"{prefix}/mean": float(self.total.mean()), f"{prefix}/std": float(self.total.std(unbiased=False))}
        for name, value in {**self.components, **self.logged}.items():
            out[f"{prefix}/{name}/mean"] = float(value.mean())
            out[f"{prefix}/{name}/std"] = float(value.std(unbiased=False))
        out.update({f"{prefix}/{key}": float(v) for key, v in self.extras.items()})
        return out


class CombinedReward:
    """``total = sum_k weight_k * component_k(samples)``; component names must be unique."""

    def __init__(self, components: Sequence[RewardComponent]) -> None:
        if not components:
            raise ValueError("CombinedReward needs at least one component")
        names = [c.name for c in components]
        if len(set(names)) != len(names):
            raise ValueError(f"reward component names must be unique, got {names}")
        for c in components:
            if not isinstance(c, RewardComponent):
                raise TypeError(
                    f"{c!r} is not a RewardComponent (needs name, weight, setup(context) and __call__(samples); "
                    "subclass propel.rewards.Reward)"
                )
        self.components = list(components)

    def setup(self, context: RewardContext) -> None:
        """Run every component's ``setup`` (once, before training)."""
        for c in self.components:
            c.setup(context)

    def __call__(self, samples: Sequence[Sample]) -> RewardBreakdown:
        parts: dict[str, torch.Tensor] = {}
        extras: dict[str, float] = {}
        logged: dict[str, torch.Tensor] = {}
        total = torch.zeros(len(samples), dtype=torch.float32)
        spent = 0.0
        for c in self.components:
            start = time.perf_counter()
            value = torch.as_tensor(c(samples), dtype=torch.float32).reshape(-1).cpu()
            seconds = time.perf_counter() - start
            spent += seconds
            extras[f"{c.name}/seconds"] = seconds
            if value.numel() != len(samples):
                raise ValueError(f"reward {c.name!r} returned {value.numel()} values for {len(samples)} samples")
            parts[c.name] = value
            total = total + c.weight * value
            if hasattr(c, "step_stats"):
                extras.update({f"{c.name}/{k}": v for k, v in c.step_stats().items()})
            if hasattr(c, "logged_values"):
                for k, v in c.logged_values().items():
                    logged[f"{c.name}_{k}"] = torch.as_tensor(v, dtype=torch.float32).reshape(-1).cpu()
        extras["seconds_per_sample"] = spent / len(samples) if len(samples) else 0.0
        return RewardBreakdown(total=total, components=parts, extras=extras, logged=logged)
