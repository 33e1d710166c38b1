"""A short run of ``experiments/triage_style/run.py`` (tiny model, two steps, two seeds) so the experiment's command
cannot rot: each seed trains through ``propel fit`` with the experiment's overlay (the forced answer prefix), the
report gives every component's windows with intervals over seeds, a rerun trains nothing, and a folder made with
other settings is refused. The measured table is the experiment's own: ``make exp-triage-style``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from propel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_triage_style_experiment_trains_each_seed_and_reports_windows(
    experiment_module, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(ROOT)
    exp = experiment_module("triage_style/run")
    out = tmp_path / "exp"
    args = ["--model", str(tiny_model_dir), "--steps", "2", "--seeds", "0", "1", "--window", "1", "--out", str(out)]
    args += ["--", "--model.init_args.max_new_tokens=8", "--model.init_args.group_size=2", "--trainer.logger=false"]
    args += ["--data.init_args.tasks.init_args.distractors=1"]  # the held-out tickets follow the training prompt
    rows = exp.main(args)

    names = {r["component"] for r in rows}
    assert names == {"total", "format", "resolution", "grounding", "calibration", "parsimony", "repetition"}
    for seed in (0, 1):
        curves = json.loads((out / f"seed{seed}" / "reward_curves.json").read_text())
        assert all(len(points) == 2 for points in curves.values())  # two steps, each component logged
        config = yaml.safe_load((out / f"seed{seed}" / "config.yaml").read_text())
        assert (
            config["data"]["init_args"]["tasks"]["init_args"]["answer_prefix"] == 'submit_resolution {"resolution": "'
        )
        assert config["seed_everything"] == seed and config["trainer"]["max_steps"] == 2
        assert config["data"]["init_args"]["seed"] == seed  # each seed draws its own ticket order
        (held_out,) = [c for c in config["trainer"]["callbacks"] if c["class_path"].endswith("HeldOutRewards")]
        trained = config["data"]["init_args"]["tasks"]["init_args"]
        measured = held_out["init_args"]["tasks"]["init_args"]
        assert measured["split"] == "eval" and trained["split"] == "train"
        assert (measured["answer_prefix"], measured["distractors"]) == (trained["answer_prefix"], 1)
        held = json.loads((out / f"seed{seed}" / "held_out_curves.json").read_text())
        assert [step for step, _ in held["total"]] == [0, 2]  # step 0 and the end, on the fixed held-out tickets
    for r in rows:
        for key in ("first", "last", "change"):
            mean, low, high = r[key]
            assert low <= mean <= high
    report = (out / "report.md").read_text()
    assert "| resolution |" in report and "Style components that moved" in report
    assert "2 steps each" in report and (out / "curves.png").stat().st_size > 0
    assert "Within each seed" in report
    assert "Held-out content (resolution), step 0 to the last checkpoint, over 2 seeds: " in report
    assert "## On fixed held-out tickets" in report and "| resolution |" in report.split("held-out tickets")[-1]
    held = {r["component"]: r for r in json.loads((out / "held_out.json").read_text())}
    assert names <= set(held) and len(held["total"]["per_seed_change"]) == 2
    for r in rows:  # one window step each: a change per seed, no within-seed interval
        assert [c[1:] for c in r["within_seed_change"]] == [[None, None], [None, None]]
    for r in rows:  # the interval's centre is the mean of the seeds' own changes, which the report lists
        assert len(r["per_seed_change"]) == 2
        assert r["change"][0] == pytest.approx(sum(r["per_seed_change"]) / 2)

    capsys.readouterr()
    assert exp.main(args) == rows  # read back: no seed trains again
    exp.main([*args[:5], "0", *args[7:]])  # one seed's report: its values, no NaN interval
    one = (out / "report.md").read_text()
    assert "[nan" not in one and "One seed: no interval over seeds" in one and "| total | " in one
    assert "[exp] seed" not in capsys.readouterr().out
    with pytest.raises(ConfigError, match="other settings"):
        exp.main([*args[:3], "3", *args[4:]])


def test_within_seed_interval_is_welchs_over_the_window_steps(experiment_module):
    """A run whose steps shift by far more than their noise changed; one whose steps are the same noise throughout
    did not; the interval is scipy's Welch interval over the two windows' steps."""
    import numpy as np
    from scipy import stats

    exp = experiment_module("triage_style/run")
    rng = np.random.default_rng(0)
    noise = rng.normal(0.0, 0.05, size=60)
    shifted = np.concatenate([noise[:30], noise[30:] + 0.3]).tolist()
    change, low, high = exp.within_seed(shifted, 20)
    assert change == pytest.approx(np.mean(shifted[-20:]) - np.mean(shifted[:20]))
    assert 0 < low < change < high
    ref = stats.ttest_ind(shifted[-20:], shifted[:20], equal_var=False).confidence_interval(0.95)
    assert (low, high) == pytest.approx((ref.low, ref.high))
    assert exp.excludes_zero([change, low, high])
    flat = exp.within_seed(noise.tolist(), 20)
    assert flat[1] < 0 < flat[2] and not exp.excludes_zero(flat)
    assert exp.within_seed([0.0] * 40, 20) == [0.0, None, None]  # nothing varies: no interval, not moved
    assert not exp.excludes_zero([0.0, None, None])
