"""Weighted sum of named reward components, keeping each component for logging.

A component that cannot judge a sample says so with NaN (or None in a list): a TRL function's "not applicable", a
grader that could not run, an environment that ended without a verdict. A component that raises judged none of the
step's samples (its exception is logged once per call, ``propel.rewards.combine``), except a ``ConfigError``: that
is the run's set-up, not a sample, and stops the run, as does a component returning the wrong number of values. An
infinite value is not a judgement either. The total is the weighted sum over the components that judged the sample,
NaN when no paying component (weight != 0) did: such a sample is unscorable and stays out of GRPO's advantages and
loss (``propel.losses.scorable``) instead of counting 0.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from propel.errors import ConfigError
from propel.losses.scorable import judged
from propel.records import Sample
from propel.rewards.reward import RewardComponent, RewardContext

log = logging.getLogger(__name__)


def scores(values, n: int, name: str) -> torch.Tensor:
    """A component's output as ``n`` float32 values, NaN where it judged nothing (None, NaN, an infinity)."""
    if isinstance(values, list | tuple):
        values = [math.nan if v is None else v for v in values]
    out = torch.as_tensor(values, dtype=torch.float32).reshape(-1).cpu()
    if out.numel() != n:
        raise ValueError(f"reward {name!r} returned {out.numel()} values for {n} samples")
    return torch.where(torch.isfinite(out), out, torch.full_like(out, math.nan))


def _finite(values: torch.Tensor) -> torch.Tensor:
    values = values.float()
    return values[torch.isfinite(values)]


@dataclass
class RewardBreakdown:
    """Total reward per sample and each component's unweighted value (NaN where the total or a component judged
    nothing)."""

    total: torch.Tensor
    components: dict[str, torch.Tensor]
    extras: dict[str, float] = field(default_factory=dict)
    """Per-step figures: each component's wall time (``<name>/seconds``), the signal cost per sample
    (``seconds_per_sample``, all components) and what components report with ``step_stats()`` (``<name>/<key>``),
    e.g. a solver-trial count."""
    logged: dict[str, torch.Tensor] = field(default_factory=dict)
    """Per-sample values logged beside the components and never paid, ``<name>_<key>`` for what a component reports
    with ``logged_values()`` (e.g. ``format_raw``: a gated style component's ungated measure)."""
    weights: dict[str, float] = field(default_factory=dict)
    """Each component's weight in the total (a weight-0 component only logs: it never makes a sample scorable);
    a component missing here counts weight 1."""
    errors: dict[str, str] = field(default_factory=dict)
    """The components that raised this step (judging none of its samples): the exception's type and message."""

    def judged(self, group_size: int) -> torch.Tensor:
        """Per sample, whether its total can enter its group's advantages (``propel.losses.scorable.judged``: a
        paying component judged it, and every paying component that judged a group-mate judged it too)."""
        names = list(self.components)
        finite = torch.isfinite(self.total)
        if not names:
            return finite
        parts = torch.stack([self.components[n].float().reshape(-1) for n in names], dim=1)
        return judged(parts, [self.weights.get(n, 1.0) for n in names], group_size) & finite

    def stats(self, prefix: str = "reward") -> dict[str, float]:
        """Mean and std of the total, of every component and of every logged value over the samples each judged
        (a key is left out when none was), and each component's share of samples it did not judge (``unscored``),
        for ``log_dict``."""
        out: dict[str, float] = {}
        for name, value in {None: self.total, **self.components, **self.logged}.items():
            key = prefix if name is None else f"{prefix}/{name}"
            seen = _finite(value)
            if seen.numel():
                out[f"{key}/mean"] = float(seen.mean())
                out[f"{key}/std"] = float(seen.std(unbiased=False))
            if name in self.components:
                out[f"{key}/unscored"] = 1.0 - seen.numel() / max(value.numel(), 1)
        out.update({f"{prefix}/{key}": float(v) for key, v in self.extras.items()})
        return out


class CombinedReward:
    """``total = sum_k weight_k * component_k(samples)`` over the components that judged each sample; component
    names must be unique. A reward made of several components (a verifiers rubric: one per reward function) lists
    them with ``parts()``, and each is a component of its own."""

    def __init__(self, components: Sequence[RewardComponent]) -> None:
        components = [p for c in components for p in (c.parts() if callable(getattr(c, "parts", None)) else [c])]
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
        n = len(samples)
        parts: dict[str, torch.Tensor] = {}
        extras: dict[str, float] = {}
        logged: dict[str, torch.Tensor] = {}
        errors: dict[str, str] = {}
        total = torch.zeros(n, dtype=torch.float32)
        seen = torch.zeros(n, dtype=torch.bool)
        paying = any(c.weight != 0 for c in self.components)
        spent = 0.0
        for c in self.components:
            start = time.perf_counter()
            try:
                raw = c(samples)
            except ConfigError:
                raise
            except Exception as e:  # a reward that raised judged nothing: out of the step, not 0
                value = torch.full((n,), math.nan)
                errors[c.name] = f"{type(e).__name__}: {e}"
                log.warning(
                    "propel: reward %r raised %s, so it judged none of this step's %d samples: %s",
                    c.name, type(e).__name__, n, str(e)[:300],
                )  # fmt: skip
            else:  # a wrong count is the reward's bug on every step, not a sample it could not judge: raised
                value = scores(raw, n, c.name)
            seconds = time.perf_counter() - start
            spent += seconds
            extras[f"{c.name}/seconds"] = seconds
            parts[c.name] = value
            finite = torch.isfinite(value)
            total = total + torch.where(finite, c.weight * value, torch.zeros(()))
            if c.weight != 0 or not paying:
                seen |= finite
            if c.name in errors:
                continue
            if hasattr(c, "step_stats"):
                extras.update({f"{c.name}/{k}": v for k, v in c.step_stats().items()})
            if hasattr(c, "logged_values"):
                for k, v in c.logged_values().items():
                    logged[f"{c.name}_{k}"] = torch.as_tensor(v, dtype=torch.float32).reshape(-1).cpu()
        extras["seconds_per_sample"] = spent / n if n else 0.0
        total = total.masked_fill(~seen, math.nan)
        weights = {c.name: float(c.weight) for c in self.components}
        return RewardBreakdown(total, parts, extras, logged, weights, errors)
