"""A short run of ``benchmarks/exp_triage_style.py`` (tiny model, two steps, two seeds) so the experiment's command
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
    benchmark_module, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(ROOT)
    exp = benchmark_module("exp_triage_style")
    out = tmp_path / "exp"
    args = ["--model", str(tiny_model_dir), "--steps", "2", "--seeds", "0", "1", "--window", "1", "--out", str(out)]
    args += ["--", "--model.init_args.max_new_tokens=8", "--model.init_args.group_size=2", "--trainer.logger=false"]
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
    for r in rows:
        for key in ("first", "last", "change"):
            mean, low, high = r[key]
            assert low <= mean <= high
    report = (out / "report.md").read_text()
    assert "| resolution |" in report and "Style components that moved" in report
    assert "2 steps each" in report and (out / "curves.png").stat().st_size > 0
    for r in rows:  # the interval's centre is the mean of the seeds' own changes, which the report lists
        assert len(r["per_seed_change"]) == 2
        assert r["change"][0] == pytest.approx(sum(r["per_seed_change"]) / 2)

    capsys.readouterr()
    assert exp.main(args) == rows  # read back: no seed trains again
    assert "[exp] seed" not in capsys.readouterr().out
    with pytest.raises(ConfigError, match="other settings"):
        exp.main([*args[:3], "3", *args[4:]])
