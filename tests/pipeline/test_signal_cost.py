"""The evaluation table's cost columns: signal cost per task, solver trials online (during RL) and offline."""

import math

import pytest

from propel.pipeline.compare import compare, cost_table
from propel.pipeline.signal_cost import labeling_trials, signal_cost
from propel.pools.summary import evaluation_summary


def test_online_trials_sum_every_components_per_step_count_and_skip_csv_gaps():
    metrics = {
        "train/reward/seconds_per_sample": [0.5, math.nan, 1.5],
        "train/reward/sil/trials": [16.0, math.nan, 24.0],
        "train/reward/sil/trials_total": [16.0, math.nan, 40.0],  # running total: not counted again
        "train/reward/other/trials": [8.0, 0.0, 0.0],
        "train/reward/mean": [0.1, 0.2, 0.3],
    }
    cost = signal_cost(metrics, offline_trials=0)
    assert cost == {
        "signal_seconds_per_task": pytest.approx(1.0),
        "solver_trials_online": 48,
        "solver_trials_offline": 0,
    }


def test_probe_arm_pays_labeling_trials_offline_and_none_online():
    label = {"tasks": 240, "valid": 85, "solve_count_hist": [60, 10, 2, 1, 0, 0, 0, 0, 12]}
    assert labeling_trials(label, 8) == 85 * 8
    assert labeling_trials(None, 8) == 0
    cost = signal_cost({"train/reward/seconds_per_sample": [0.02, 0.04]}, labeling_trials(label, 8))
    assert cost["solver_trials_online"] == 0 and cost["solver_trials_offline"] == 680
    assert signal_cost({}, 0)["signal_seconds_per_task"] is None  # a run that logged no timing: no number


def test_cost_table_in_the_comparison():
    base = evaluation_summary([True, False], [0, None], ["a b c", "junk"], ["t", None], 2, (1, 1))
    trained = evaluation_summary([True, True], [1, 1], ["a b c", "d e f"], ["t", "u"], 2, (1, 1))
    costs = {"trained": {"signal_seconds_per_task": 0.0312, "solver_trials_online": 0, "solver_trials_offline": 680}}
    text = compare(base, trained, costs=costs)
    assert "| policy | signal cost per task (s) | solver trials online | solver trials offline |" in text
    assert "| base | - | - | - |" in text and "| trained | 0.0312 | 0 | 680 |" in text
    assert "| sil | n/a | 5 | 0 |" in cost_table(
        {"sil": {"signal_seconds_per_task": None, "solver_trials_online": 5, "solver_trials_offline": 0}}, ("sil",)
    )
    assert "signal cost" not in compare(base, trained)  # no costs given: no cost table
