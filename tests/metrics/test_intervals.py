"""Confidence intervals against scipy and published cases: Wilson, Newcombe, the (two-sample) bootstrap."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from propel.metrics.intervals import (
    Interval,
    bootstrap,
    bootstrap_difference,
    describe_change,
    jackknife,
    n_per_arm,
    newcombe,
    normal_difference,
    wilson,
)


@pytest.mark.parametrize(("k", "n"), [(0, 24), (1, 24), (7, 24), (24, 24), (13, 40), (3, 5), (400, 769)])
@pytest.mark.parametrize("confidence", [0.9, 0.95, 0.99])
def test_wilson_matches_scipy(k, n, confidence):
    expected = stats.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    ci = wilson(k, n, confidence)
    assert ci.estimate == pytest.approx(k / n)
    assert (ci.low, ci.high) == pytest.approx((expected.low, expected.high), abs=1e-12)


def test_wilson_of_nothing_is_none_and_bad_counts_raise():
    assert wilson(0, 0) is None
    with pytest.raises(ValueError, match="successes"):
        wilson(5, 4)


def test_newcombe_matches_the_published_example():
    """Newcombe (1998), Statistics in Medicine 17:873, Table II example (56/70 vs 48/80): method 10 gives
    0.0524 to 0.3339 for the difference 0.2."""
    ci = newcombe(56, 70, 48, 80)
    assert ci.estimate == pytest.approx(0.2)
    assert (round(ci.low, 4), round(ci.high, 4)) == (0.0524, 0.3339)
    assert ci.excludes_zero
    same = newcombe(9, 24, 13, 24)  # 0.375 vs 0.54: a 17-point fall on 24 tasks each
    assert same.low < 0 < same.high and not same.excludes_zero
    assert newcombe(0, 0, 3, 10) is None


def test_bootstrap_matches_scipy_percentile_bootstrap():
    values = np.random.default_rng(5).normal(size=30)
    expected = stats.bootstrap(
        (values,), np.mean, n_resamples=999, method="percentile", rng=np.random.default_rng(3), vectorized=True
    ).confidence_interval
    ci = bootstrap(values, n_resamples=999, seed=3)
    assert (ci.low, ci.high) == pytest.approx((expected.low, expected.high), abs=1e-12)
    assert ci.estimate == pytest.approx(values.mean())
    median = bootstrap(values, statistic=np.median, n_resamples=200, seed=1)
    expected = stats.bootstrap(
        (values,), np.median, n_resamples=200, method="percentile", rng=np.random.default_rng(1), vectorized=False
    ).confidence_interval
    assert (median.low, median.high) == pytest.approx((expected.low, expected.high), abs=1e-12)


def test_two_sample_bootstrap_matches_scipy():
    base = np.random.default_rng(5).normal(size=30)
    trained = np.random.default_rng(6).normal(size=20) + 0.5

    def diff(a, b, axis=-1):
        return a.mean(axis) - b.mean(axis)

    expected = stats.bootstrap(
        (trained, base), diff, n_resamples=999, method="percentile", rng=np.random.default_rng(3), vectorized=True
    ).confidence_interval
    ci = bootstrap_difference(trained, base, n_resamples=999, seed=3)
    assert (ci.low, ci.high) == pytest.approx((expected.low, expected.high), abs=1e-12)
    assert ci.estimate == pytest.approx(trained.mean() - base.mean())


def test_bootstrap_is_seeded_and_refuses_degenerate_input():
    values = np.random.default_rng(0).random(40).tolist()
    assert bootstrap(values, n_resamples=100, seed=4) == bootstrap(values, n_resamples=100, seed=4)
    assert bootstrap(values, n_resamples=100, seed=4) != bootstrap(values, n_resamples=100, seed=5)
    assert bootstrap([0.3]) is None and bootstrap_difference([0.3], values) is None
    with pytest.raises(ValueError, match="NaN"):
        bootstrap([0.1, float("nan")])


def test_tasks_per_arm_for_a_ten_point_change():
    # z^2 * 2 p (1 - p) / d^2 = 1.96^2 * 0.5 / 0.01 = 192.07 -> 193: the interval's half-width is 0.10
    assert n_per_arm(0.10) == 193
    assert n_per_arm(0.10, power=0.8) == 393  # (1.96 + 0.84)^2 * 0.5 / 0.01
    assert n_per_arm(0.05) == 769  # half-width 0.05
    # at 193 tasks each, a true 10-point change from 0.5 is seen as distinguishable about half of the time
    ci = newcombe(round(0.6 * 193), 193, round(0.5 * 193), 193)
    assert ci.low == pytest.approx(0.0, abs=0.01)


def test_change_in_words():
    assert describe_change("validity", newcombe(56, 70, 48, 80)).startswith("validity rose by +0.2 (95% interval")
    assert describe_change("validity", newcombe(48, 80, 56, 70)).endswith(": distinguishable from zero")
    assert describe_change("utility", newcombe(9, 24, 13, 24)).endswith("not distinguishable from zero")
    assert "no interval" in describe_change("utility", None)


def test_jackknife_standard_error_by_hand_and_the_mean_of_a_sample():
    """For the mean, the jackknife standard error is exactly the sample standard error s / sqrt(n)."""
    values = np.array([2.0, 4.0, 4.0, 5.0, 7.0, 9.0])
    loo = [(values.sum() - v) / (len(values) - 1) for v in values]
    ci = jackknife(float(values.mean()), loo)
    se = values.std(ddof=1) / np.sqrt(len(values))
    assert ci.high - ci.estimate == pytest.approx(1.959963985 * se)
    assert ci.estimate - ci.low == pytest.approx(ci.high - ci.estimate) and ci.method == "jackknife"
    assert jackknife(1.0, [0.5, float("nan")]) is None  # one usable value: no spread to estimate


def test_normal_difference_adds_half_widths_in_quadrature():
    new, old = Interval(0.6, 0.5, 0.7), Interval(0.4, 0.37, 0.43)
    diff = normal_difference(new, old)
    assert diff.estimate == pytest.approx(0.2) and diff.high - diff.estimate == pytest.approx((0.1**2 + 0.03**2) ** 0.5)
    assert normal_difference(new, None) is None
    with pytest.raises(ValueError, match="different confidence"):
        normal_difference(new, Interval(0.4, 0.3, 0.5, confidence=0.9))


def test_t_interval_matches_scipy():
    import numpy as np
    from scipy import stats

    from propel.metrics.intervals import t_interval

    values = np.random.default_rng(3).normal(0.1, 0.4, size=12)
    got = t_interval(values, confidence=0.9)
    low, high = stats.t.interval(0.9, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
    assert got.method == "t"
    assert got.estimate == pytest.approx(values.mean())
    assert (got.low, got.high) == (pytest.approx(low), pytest.approx(high))
    assert t_interval([1.0]) is None


def test_mean_t_interval_is_the_t_interval_as_a_table_cell():
    import math

    from propel.metrics.intervals import mean_t_interval, t_interval

    values = [0.2, 0.5, 0.1, 0.4]
    got = t_interval(values)
    assert mean_t_interval(values) == (got.estimate, got.low, got.high)
    assert mean_t_interval([*values, math.nan]) == mean_t_interval(values)  # an undefined value is dropped
    mean, low, high = mean_t_interval([0.3])
    assert mean == 0.3 and math.isnan(low) and math.isnan(high)  # one value: no interval
    assert all(math.isnan(x) for x in mean_t_interval([math.nan]))
