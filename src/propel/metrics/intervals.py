"""Confidence intervals for evaluation numbers, and for the change between two evaluations (trained - base).

A rate (valid rate, utility as the in-band share) gets a Wilson score interval, which keeps its coverage near the
nominal level at the small counts and extreme rates evaluations produce (the normal-approximation interval does not:
at 0 of 24 it is [0, 0]). The difference of two independent rates gets Newcombe's hybrid score interval (Newcombe
1998, method 10), built from the two Wilson intervals. Any other statistic (a mean of per-task scores) gets a
seeded percentile bootstrap; a difference of two such statistics a two-sample bootstrap (each sample resampled on
its own). The bootstrap draws its indices exactly as ``scipy.stats.bootstrap(..., method="percentile")`` does with
the same seeded generator, so the two agree to the last digit. A corpus statistic that resampling would bias
(Distinct-n: a repeated text lowers it) gets a jackknife standard error and a normal interval; two independent ones
differ by ``normal_difference``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

Statistic = Callable[[np.ndarray], float]


@dataclass(frozen=True)
class Interval:
    """A point estimate with its two-sided confidence interval."""

    estimate: float
    low: float
    high: float
    confidence: float = 0.95
    method: str = ""
    """How it was computed: ``wilson``, ``newcombe``, ``bootstrap``, ``bootstrap_difference``, ``t``, ``jackknife`` or
    ``normal_difference``."""

    @property
    def excludes_zero(self) -> bool:
        """True when zero lies outside the interval: a difference distinguishable from none at this confidence."""
        return self.low > 0 or self.high < 0

    def as_dict(self) -> dict:
        return {"estimate": self.estimate, "low": self.low, "high": self.high, "confidence": self.confidence}


def z_value(confidence: float) -> float:
    """The two-sided standard-normal quantile: 1.96 at 0.95."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: int, n: int, confidence: float = 0.95) -> Interval | None:
    """Wilson score interval of ``successes / n`` (as ``scipy.stats.binomtest(...).proportion_ci("wilson")``);
    None when ``n`` is 0 (no rate to bound)."""
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got {successes} of {n}")
    if n == 0:
        return None
    z = z_value(confidence)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return Interval(p, max(0.0, centre - half), min(1.0, centre + half), confidence, "wilson")


def newcombe(successes: int, n: int, base_successes: int, base_n: int, confidence: float = 0.95) -> Interval | None:
    """Newcombe's hybrid score interval of ``successes / n - base_successes / base_n`` (two independent samples);
    None when either sample is empty."""
    new, old = wilson(successes, n, confidence), wilson(base_successes, base_n, confidence)
    if new is None or old is None:
        return None
    diff = new.estimate - old.estimate
    low = diff - math.sqrt((new.estimate - new.low) ** 2 + (old.high - old.estimate) ** 2)
    high = diff + math.sqrt((new.high - new.estimate) ** 2 + (old.estimate - old.low) ** 2)
    return Interval(diff, low, high, confidence, "newcombe")


def percentile_interval(replicates: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = (1 - confidence) / 2
    low, high = np.percentile(replicates, [100 * alpha, 100 * (1 - alpha)])
    return float(low), float(high)


def _resample(values: np.ndarray, rng: np.random.Generator, n_resamples: int, statistic: Statistic) -> np.ndarray:
    index = rng.integers(0, values.size, (n_resamples, values.size))
    draws = values[index]
    if statistic is np.mean:
        return draws.mean(axis=-1)
    return np.array([statistic(row) for row in draws])


def _check(values: Sequence[float], name: str) -> np.ndarray:
    array = np.asarray(values, dtype=float).reshape(-1)
    if np.isnan(array).any():
        raise ValueError(f"{name}: NaN among the values; drop undefined entries before bootstrapping")
    return array


def bootstrap(
    values: Sequence[float],
    statistic: Statistic = np.mean,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval | None:
    """Percentile bootstrap interval of ``statistic(values)`` (resampling the values with replacement, seeded);
    None with fewer than 2 values (nothing to resample)."""
    array = _check(values, "bootstrap")
    if array.size < 2:
        return None
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    replicates = _resample(array, np.random.default_rng(seed), n_resamples, statistic)
    low, high = percentile_interval(replicates, confidence)
    return Interval(float(statistic(array)), low, high, confidence, "bootstrap")


def bootstrap_difference(
    values: Sequence[float],
    base_values: Sequence[float],
    statistic: Statistic = np.mean,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> Interval | None:
    """Two-sample percentile bootstrap of ``statistic(values) - statistic(base_values)``: each sample resampled on
    its own (independent evaluations, not paired tasks); None when either has fewer than 2 values."""
    new, old = _check(values, "bootstrap_difference"), _check(base_values, "bootstrap_difference")
    if new.size < 2 or old.size < 2:
        return None
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be >= 1, got {n_resamples}")
    rng = np.random.default_rng(seed)
    replicates = _resample(new, rng, n_resamples, statistic) - _resample(old, rng, n_resamples, statistic)
    low, high = percentile_interval(replicates, confidence)
    return Interval(float(statistic(new) - statistic(old)), low, high, confidence, "bootstrap_difference")


def t_interval(values: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """Student-t interval of the mean of ``values`` (paired differences: one per seed, context or task); None with
    fewer than 2 values."""
    from scipy.stats import t as student_t

    array = _check(values, "t_interval")
    if array.size < 2:
        return None
    mean, se = float(array.mean()), float(array.std(ddof=1) / math.sqrt(array.size))
    half = float(student_t.ppf(0.5 + confidence / 2, array.size - 1)) * se
    return Interval(mean, mean - half, mean + half, confidence, "t")


def mean_t_interval(values: Sequence[float], confidence: float = 0.95) -> tuple[float, float, float]:
    """``(mean, low, high)`` of ``t_interval`` as a table's cell: NaN values dropped, NaN bounds with fewer than two
    values left, all NaN with none."""
    array = np.asarray(values, dtype=float).reshape(-1)
    array = array[~np.isnan(array)]
    if not array.size:
        return math.nan, math.nan, math.nan
    interval = t_interval(array, confidence)
    if interval is None:
        return float(array.mean()), math.nan, math.nan
    return interval.estimate, interval.low, interval.high


def jackknife(estimate: float, leave_one_out: Sequence[float], confidence: float = 0.95) -> Interval | None:
    """Normal interval of ``estimate`` from its leave-one-out values: the jackknife standard error
    ``sqrt((n-1)/n * sum((v_i - mean v)^2))`` (Efron & Tibshirani 1993, eq. 11.5). NaN values (nothing left without
    that sample) are dropped. None with fewer than 2 values."""
    values = np.asarray(leave_one_out, dtype=float)
    values = values[~np.isnan(values)]
    if values.size < 2:
        return None
    se = math.sqrt((values.size - 1) / values.size * float(np.sum((values - values.mean()) ** 2)))
    half = z_value(confidence) * se
    return Interval(float(estimate), float(estimate) - half, float(estimate) + half, confidence, "jackknife")


def normal_difference(new: Interval | None, old: Interval | None) -> Interval | None:
    """``new - old`` of two independent normal intervals at the same confidence: the half-widths add in
    quadrature. None when either is missing."""
    if new is None or old is None:
        return None
    if new.confidence != old.confidence:
        raise ValueError(f"intervals at different confidence: {new.confidence} vs {old.confidence}")
    half = math.hypot(new.high - new.estimate, old.high - old.estimate)
    estimate = new.estimate - old.estimate
    return Interval(estimate, estimate - half, estimate + half, new.confidence, "normal_difference")


def n_per_arm(difference: float = 0.10, rate: float = 0.5, confidence: float = 0.95, power: float = 0.5) -> int:
    """Tasks per evaluation (base and trained each) for a true change of ``difference`` in a rate near ``rate`` to
    give an interval of the change that excludes zero with probability ``power`` (normal approximation).

    At ``power=0.5`` this is the size at which the interval's half-width equals ``difference``: an observed change
    of that size is just distinguishable. 0.10 at rate 0.5: 193 per arm; with 80% power: 393; a half-width of 0.05
    (``difference=0.05``): 769.
    """
    if not 0 < difference < 1 or not 0 < rate < 1 or not 0 < power < 1:
        raise ValueError("difference, rate and power must each lie in (0, 1)")
    z = z_value(confidence) + NormalDist().inv_cdf(power)
    return math.ceil(z * z * 2 * rate * (1 - rate) / difference**2)


def describe_change(name: str, interval: Interval | None, digits: int = 3) -> str:
    """The change in words: its size, its interval and whether it is distinguishable from zero."""
    if interval is None:
        return f"{name}: no interval (too few tasks)"
    pct = round(100 * interval.confidence)
    low, high = f"{interval.low:+.{digits}g}", f"{interval.high:+.{digits}g}"
    numbers = f"{interval.estimate:+.{digits}g} ({pct}% interval {low} to {high})"
    if not interval.excludes_zero:
        return f"{name} changed by {numbers}: not distinguishable from zero"
    return f"{name} {'rose' if interval.estimate > 0 else 'fell'} by {numbers}: distinguishable from zero"
