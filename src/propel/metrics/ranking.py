"""Best-of-k lift: how much a scorer's top pick within a group beats a random pick from the same group.

GRPO compares the tasks of one context's group with each other, so what a task reward must do is rank the valid
tasks *within* a group by their utility; a pooled AUROC mixes groups that a GRPO step never compares. The lift of
one group is the utility of the scorer's top-scored task (ties averaged) minus the group's mean utility, which is
the expected utility of a uniformly random pick; its mean over groups is the endpoint the PROPEL ranking experiment
(``benchmarks/exp_probe_ranking.py``) resamples over groups.
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
