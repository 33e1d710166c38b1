"""Best-of-k lift: how much a scorer's top pick within a group beats a random pick from the same group.

GRPO compares the tasks of one context's group with each other, so what a task reward must do is rank the valid
tasks *within* a group by their utility; a pooled AUROC mixes groups that a GRPO step never compares. The lift of
one group is the utility of the scorer's top-scored task (ties averaged) minus the group's mean utility, which is
the expected utility of a uniformly random pick; its mean over groups is the endpoint the PROPEL ranking experiment
(``experiments/probe_ranking/run.py``) resamples over groups.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np


def best_pick_lift(
    groups: Sequence[Hashable], scores: Sequence[float], utility: Sequence[float], min_size: int = 2
) -> tuple[list[Hashable], np.ndarray]:
    """``(group keys, lifts)`` for each group with at least ``min_size`` items, in first-seen order: the mean
    utility of the top-scored items (all that tie for the top) minus the group's mean utility."""
    groups = list(groups)
    s, u = np.asarray(scores, dtype=np.float64), np.asarray(utility, dtype=np.float64)
    if not len(groups) == len(s) == len(u):
        raise ValueError(f"groups, scores and utility differ in length: {len(groups)}, {len(s)}, {len(u)}")
    members: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(i)
    keys, lifts = [], []
    for g, idx in members.items():
        if len(idx) < min_size:
            continue
        gs, gu = s[idx], u[idx]
        top = np.isclose(gs, gs.max(), rtol=0.0, atol=1e-12)
        keys.append(g)
        lifts.append(float(gu[top].mean() - gu.mean()))
    return keys, np.asarray(lifts)


def best_of_k_lift(scores: Sequence[float], utility: Sequence[float], k: int) -> float:
    """Expected utility of the top-scored item of a uniformly random ``k``-subset of the items, minus their mean
    utility: what a scorer adds when it picks one task out of ``k`` (GRPO's group) over a random pick, exactly, over
    every subset (ties broken at random, so a constant scorer's lift is 0).

    With the items sorted by score, the one at rank ``r`` (1 = lowest) tops a random ``k``-subset with probability
    ``C(r-1, k-1) / C(n, k)``; a tie group contributes its mean utility at each of its ranks. ``k`` larger than the
    number of items is clipped to it (then the lift is the top item's excess over the mean).
    """
    s, u = np.asarray(scores, dtype=np.float64), np.asarray(utility, dtype=np.float64)
    if len(s) != len(u):
        raise ValueError(f"scores and utility differ in length: {len(s)} and {len(u)}")
    n = len(s)
    if n == 0:
        return float("nan")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    k = min(k, n)
    order = np.argsort(s, kind="stable")
    s_sorted, u_sorted = s[order], u[order]
    starts = np.flatnonzero(np.r_[True, np.diff(s_sorted) > 1e-12])  # each run of tied scores: one utility, its mean
    sizes = np.diff(np.r_[starts, n])
    tie_mean = np.repeat(np.add.reduceat(u_sorted, starts) / sizes, sizes)
    ranks = np.arange(1, n + 1)
    # C(r-1, k-1) / C(n, k) through log-gamma (exact enough for n in the thousands)
    from scipy.special import gammaln

    log_total = gammaln(n + 1) - gammaln(k + 1) - gammaln(n - k + 1)
    log_w = gammaln(ranks) - gammaln(k) - gammaln(ranks - k + 1) - log_total
    weights = np.where(ranks >= k, np.exp(log_w), 0.0)
    return float((weights * tie_mean).sum() - u.mean())
