"""``experiments/demo_seeds/run.py`` in seconds: each seed is the demo's pipeline with that seed (the real config
composed), a committed seed is read back and not run again, the session budget stops before the next seed, and the
report is recomputed from the kept summaries (a changed number is refused). The seeds' pipeline runs are stood in for
by the committed half-size demo's own stage summaries with the primary contrast planted per seed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "docs" / "experiments" / "demo_2026-12-07"


def test_each_seed_is_the_demos_pipeline_with_that_seed(experiment_module, tmp_path):
    from propel.pipeline.stage_configs import load_pipeline_config

    exp = experiment_module("demo_seeds/run")
    args = exp.parse_args(["--workdir", str(tmp_path)])
    for seed in (1, 5):
        overrides = [f"workdir={tmp_path / f'seed{seed}'}", f"seed={seed}", *args.overrides]
        cfg = load_pipeline_config(args.config, overrides)
        assert cfg.seed == seed and cfg.stages == exp.STAGES
    assert args.seeds == [1, 2, 3, 4, 5]


def test_seeds_run_once_resume_from_out_and_the_report_recomputes(experiment_module, tmp_path, monkeypatch):
    exp = experiment_module("demo_seeds/run")
    planted = {1: 0.05, 2: 0.03, 3: 0.07, 4: 0.04, 5: 0.06}
    ran = []

    def run_seed(args, seed):
        work = tmp_path / "work" / f"seed{seed}"
        for stage in exp.STAGES:
            (work / stage).mkdir(parents=True, exist_ok=True)
            shutil.copy(DEMO / f"{stage}_summary.json", work / stage / "summary.json")
        ev = json.loads((work / "evaluate" / "summary.json").read_text())
        ev["lift_vs_gate_arm"]["exact_utility"].update(estimate=planted[seed], low=planted[seed] - 0.1)
        (work / "evaluate" / "summary.json").write_text(json.dumps(ev))
        ran.append(seed)
        return work

    monkeypatch.setattr(exp, "run_seed", run_seed)
    out = tmp_path / "results"
    first = exp.main(["--out", str(out), "--max-seeds", "2"])
    assert ran == [1, 2] and [r["seed"] for r in first["rows"]] == [1, 2]
    assert "PARTIAL, 2 of 5 seeds" in (out / "report.md").read_text()
    summary = exp.main(["--out", str(out)])  # a new session: seeds 1 and 2 are read back
    assert ran == [1, 2, 3, 4, 5]
    primary = summary["analysis"]["trained - gate arm (primary)"]
    assert primary["per_seed"] == [planted[s] for s in (1, 2, 3, 4, 5)] and primary["mean"] == pytest.approx(0.05)
    assert primary["t95"][0] > 0 and primary["decision"] == "shows a gain"
    ev = json.loads((DEMO / "evaluate_summary.json").read_text())
    gate_warm = ev["gate_arm"]["exact_utility"] - ev["warm_start"]["exact_utility"]  # not planted: the same each seed
    assert summary["analysis"]["gate arm - warm start"]["per_seed"] == [pytest.approx(gate_warm)] * 5
    assert summary["rows"][0]["reward"] == json.loads((DEMO / "probe_summary.json").read_text())["reward"]
    text = (out / "report.md").read_text()
    assert text.startswith("# The half-size demo over seeds: trained minus gate arm +0.050 [") and "PARTIAL" not in text
    assert exp.main(["--from-out", str(out)]) == json.loads((out / "summary.json").read_text())
    kept = out / "seed3" / "evaluate_summary.json"
    ev = json.loads(kept.read_text())
    ev["lift_vs_gate_arm"]["exact_utility"]["estimate"] = 0.9
    kept.write_text(json.dumps(ev))
    with pytest.raises(SystemExit, match="do not reproduce"):
        exp.main(["--from-out", str(out)])
