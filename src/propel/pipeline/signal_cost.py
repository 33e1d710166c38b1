"""What a reward signal cost during RL and before it (the PROPEL paper's Table 3): PROPEL pays its solver trials
offline, once, to label the probe's pool; solver-in-the-loop (SIL) pays them online, at every step.

``signal_cost`` reads a GRPO run's per-step metrics (``reward/seconds_per_sample`` and every ``reward/<name>/trials``
that ``CombinedReward`` logs) and the labeling summary, and gives the evaluation table's cost columns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

COLUMNS = {
    "signal_seconds_per_task": "signal cost per task (s)",
    "solver_trials_online": "solver trials online",
    "solver_trials_offline": "solver trials offline",
}
"""The cost columns of the evaluation table, by summary key."""


def _finite(values: Sequence[float]) -> list[float]:
    return [float(v) for v in values if v == v]  # CSV gaps are NaN


def labeling_trials(label_summary: Mapping | None, n_trials: int) -> int:
    """Solver trials labeling ran: ``n_trials`` per valid task and per degenerate one (solved for the lenient
    yield; other invalid tasks are never solved)."""
    if not label_summary:
        return 0
    tried = int(sum(label_summary.get("solve_count_hist") or [])) + int(label_summary.get("degenerate") or 0)
    return tried * int(n_trials)


def signal_cost(metrics: Mapping[str, Sequence[float]], offline_trials: int = 0) -> dict[str, float | int | None]:
    """The cost columns of one trained arm: mean reward wall time per scored generation over the run's steps, solver
    trials run during RL (sum over steps of every ``train/reward/<name>/trials``) and before it (``offline_trials``).
    A run that logged no reward timing has None as its cost per task."""
    per_sample = _finite(metrics.get("train/reward/seconds_per_sample", []))
    online = sum(
        sum(_finite(values))
        for key, values in metrics.items()
        if key.startswith("train/reward/") and key.endswith("/trials")
    )
    return {
        "signal_seconds_per_task": sum(per_sample) / len(per_sample) if per_sample else None,
        "solver_trials_online": int(online),
        "solver_trials_offline": int(offline_trials),
    }
