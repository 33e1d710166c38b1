"""A short run of ``benchmarks/exp_turn_kl_scope.py`` (tiny model, two steps, two seeds, every arm) so the
experiment's command cannot rot: each arm-seed trains with its scope and hint, measures the target gap and the drift
at step 0 and at each checkpoint, the report compares the arms at equal gain, a rerun trains nothing, and a folder
made with other settings is refused. The measured table is the experiment's own: ``make exp-turn-kl-scope``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from propel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(900)
def test_turn_kl_scope_experiment_trains_every_arm_and_compares_at_equal_gain(
    benchmark_module, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(ROOT)
    exp = benchmark_module("exp_turn_kl_scope")
    out = tmp_path / "exp"
    args = ["--model", str(tiny_model_dir), "--steps", "2", "--every", "1", "--seeds", "0", "1", "--held-out", "2",
            "--samples", "2", "--lr", "0.05", "--out", str(out), "--", "--model.init_args.max_new_tokens=6",
            "--data.init_args.execute_cut_turns=true"]  # fmt: skip
    analysis = exp.main(args)

    assert set(analysis["arms"]) == {"targeted", "sequence", "control"} and analysis["seeds"] == [0, 1]
    for arm in ("targeted", "sequence", "control"):
        for seed in (0, 1):
            result = json.loads((out / arm / f"seed{seed}" / "result.json").read_text())
            assert [c["step"] for c in result["curve"]] == [0, 1, 2]
            start, end = result["curve"][0], result["curve"][-1]
            assert start["drift_turn0"] == 0.0 and end["drift_turn0"] > 0  # trained: turn 0 moved
            assert start["target_gap"] > 0 and result["behaviour"]["before"][1] == 4  # 2 tasks x 2 samples
        gap = analysis["arms"][arm]["gap_before"]
        assert gap[1] <= gap[0] <= gap[2]
    starts = {arm: json.loads((out / arm / "seed0" / "result.json").read_text())["curve"][0]["target_gap"]
              for arm in ("targeted", "sequence", "control")}  # fmt: skip
    assert len(set(starts.values())) == 1  # the same held-out episodes and fixed teacher in every arm
    assert [m["seed"] for m in analysis["matched"]] == [0, 1]
    report = (out / "report.md").read_text()
    assert "| targeted |" in report and "| sequence |" in report and "At equal target gain" in report
    assert (out / "drift_vs_gain.png").stat().st_size > 0

    capsys.readouterr()
    assert json.dumps(exp.main(args)) == json.dumps(analysis)  # read back: no arm trains again
    assert "[exp]" not in capsys.readouterr().out
    with pytest.raises(ConfigError, match="other settings"):
        exp.main([*args[:3], "3", *args[4:]])


def test_turn_kl_scope_trainer_placement_comes_from_the_fit_flags(benchmark_module, tiny_model_dir, monkeypatch):
    """CPU and default precision unless ``--trainer.*`` flags after ``--`` say otherwise (a GPU run needs no edit)."""
    monkeypatch.chdir(ROOT)
    exp = benchmark_module("exp_turn_kl_scope")
    args = argparse.Namespace(model=str(tiny_model_dir), steps=2, episodes=2, lr=1e-4, kl_coefficient=1.0,
                              contexts=2, extra=[])  # fmt: skip
    assert exp.build(args, 0, "turn")[2] == {"accelerator": "cpu", "precision": None}
    args.extra = ["--trainer.precision=bf16-mixed"]  # (an accelerator=gpu flag takes the same path; no GPU here)
    assert exp.build(args, 0, "turn")[2] == {"accelerator": "cpu", "precision": "bf16-mixed"}
