"""``experiments/letter_band/pilot.py`` at a few tasks: the shares of too hard, in band and too easy partition the
tasks, p is a probability and the sampled check ran. The measured table is the pilot's own:
``docs/experiments/letter_band``."""

from __future__ import annotations

import json

import pytest


@pytest.mark.real_model
def test_a_small_pilot_partitions_the_tasks_and_checks_p(experiment_module, tmp_path):
    pilot = experiment_module("letter_band/pilot")
    args = ["--words", "1", "3", "--tasks", "3", "--validate", "2", "--validate-trials", "2", "--out", str(tmp_path)]
    summary = pilot.main(args)
    for row in summary["table"]:
        assert row["too_hard"] + row["in_band"] + row["too_easy"] == pytest.approx(1.0)
        assert 0.0 <= row["mean_p"] <= 1.0
    assert [r["tasks"] for r in summary["table"]] == [3, 3, 6]
    assert summary["validation"]["tasks"] == 2
    saved = json.loads((tmp_path / "summary.json").read_text())
    assert len(saved["rows"]) == 6 and "| all | 6 |" in (tmp_path / "report.md").read_text()
