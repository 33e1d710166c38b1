"""Probe selection: best validation balanced accuracy under a calibration limit, reward variance (RVP) as tiebreak.

RVP is the variance of the exact RL reward (``propel.probes.gate.gated_reward``, validity gate included) over a
fixed sample of the starting policy's generations: an accurate probe that gives every on-policy task nearly the same
reward carries no GRPO signal. The calibration limit reads the ECE after post-hoc calibration
(``val_ece_calibrated``): the reward's probabilities are calibrated ones, so a probe is not rejected for a
miscalibration the artifact corrects, and only its excess over the ECE a calibrated probe shows on as many rows
(``val_ece_excess``): a small fold's sampling noise alone puts an informative probe's ECE near 0.2, and a limit on
that would select the uninformative one.
"""

from __future__ import annotations

import warnings

from torch import Tensor


def rvp(rewards: Tensor) -> tuple[float, float]:
    """``(overall, within)`` reward variance of ``rewards`` [num_contexts, G].

    ``overall`` is the variance over all samples, ``within`` the mean over contexts of the variance among the G
    samples of one context (what GRPO's group-relative advantage sees). Population variances (divide by n).
    """
    if rewards.ndim != 2 or rewards.shape[0] < 1 or rewards.shape[1] < 1:
        raise ValueError(f"rewards: expected [num_contexts, G] with both >= 1, got {tuple(rewards.shape)}")
    r = rewards.detach().double()
    overall = r.flatten().var(correction=0)
    within = r.var(dim=1, correction=0).mean()
    return float(overall), float(within)


def select_probe(
    table,
    *,
    max_ece: float = 0.1,
    metric: str = "val_balanced_accuracy",
    ece_column: str = "val_ece_excess",
    rvp_column: str = "rvp_overall",
    tie_tolerance: float = 0.01,
):
    """The selected row of a sweep table (a pandas Series).

    Rows with ``ece_column <= max_ece`` are eligible (all rows, with a warning, when none is); among them those
    within ``tie_tolerance`` of the best ``metric`` tie, and the tie goes to the highest RVP when the table has it.
    A table without the excess column is read on ``val_ece_calibrated``, and one without that (written before
    calibration) on its raw ``val_ece``.
    """
    if len(table) == 0:
        raise ValueError("table: the sweep produced no rows to select from")
    older = {"val_ece_excess": "val_ece_calibrated", "val_ece_calibrated": "val_ece"}  # tables from before them
    while ece_column not in table.columns and ece_column in older:
        ece_column = older[ece_column]
    for col in (metric, ece_column):
        if col not in table.columns:
            raise ValueError(f"table: missing column {col!r} (have {', '.join(table.columns)})")
    ok = table[table[ece_column] <= max_ece]
    if len(ok) == 0:
        warnings.warn(
            f"select_probe: no probe has {ece_column} <= {max_ece}; ignoring the calibration limit", stacklevel=2
        )
        ok = table
    ok = ok[ok[metric].notna()]
    if len(ok) == 0:
        raise ValueError(f"table: every eligible row has {metric} = NaN")
    best = ok[metric].max()
    tied = ok[ok[metric] >= best - tie_tolerance]
    if rvp_column in tied.columns and tied[rvp_column].notna().any():
        return tied.loc[tied[rvp_column].idxmax()]
    return tied.loc[tied[metric].idxmax()]
