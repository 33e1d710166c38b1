"""A short run of ``experiments/turn_kl_scope/run.py`` (tiny model, one step, one seed, every arm) so the
experiment's command cannot rot: every held-out conversation reaches all six turns, each arm-seed measures target
success, off-target accuracy, bleed, drift before and after t and retention at step 0 and at each checkpoint, the
report compares the arms at matched target success (the unrelated hint, which gains none, at the last step), a rerun
trains nothing, ``--report-only`` reports the finished arm-seeds alone (a first-grid folder's arms under today's
names), a folder made with other settings is refused, and each arm's flags reach the trainer (scope, anchor,
proximal, normalisation, lr). The measured table is the experiment's own: ``make exp-turn-kl-scope``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from propel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
ARMS = ("turn_only", "t_to_end", "turn_only_anchor", "proximal", "whole_episode", "unrelated_hint", "none")
MATCHED = {"t_to_end", "turn_only_anchor", "proximal", "whole_episode"}


@pytest.mark.timeout(900)
def test_turn_kl_scope_experiment_runs_every_arm_and_compares_at_matched_success(
    experiment_module, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(ROOT)
    exp = experiment_module("turn_kl_scope/run")
    out = tmp_path / "exp"
    args = ["--model", str(tiny_model_dir), "--steps", "1", "--ckpt-every", "1", "--seeds", "0", "--held-out", "2",
            "--samples", "2", "--contexts", "1", "--lr", "0.05", "--out", str(out), "--",
            "--model.init_args.max_new_tokens=3"]  # fmt: skip
    analysis = exp.main(args)

    assert set(analysis["arms"]) == set(ARMS) and set(analysis["comparisons"]) == MATCHED | {"unrelated_hint"}
    for arm in ARMS:
        for seed in (0,):
            result = json.loads((out / arm / f"seed{seed}" / "result.json").read_text())
            assert result["turns"] == [6, 6]  # every held-out conversation reaches every turn
            assert [c["step"] for c in result["curve"]] == ([0] if arm == "none" else [0, 1])
            start, end = result["curve"][0], result["curve"][-1]
            assert start["drift_before"] == start["drift_after"] == start["retention"] == 0.0
            assert all(0.0 <= end[k] <= 1.0 for k in ("target_success", "acc_plain", "acc_conflict", "bleed"))
            if arm != "none":
                assert end["drift_before"] > 0 and end["drift_after"] > 0  # trained: the off-target turns moved
        assert analysis["arms"][arm]["every_turn_reached"]
    for comp in analysis["comparisons"].values():
        assert [r["seed"] for r in comp["matched"]] == [0]
    same = analysis["same_step"]["unrelated_hint"]  # no matched level: compared at the same (last) step
    assert [(r["seed"], r["step"]) for r in same["rows"]] == [(0, 1)]
    row = same["rows"][0]
    difference = row["drift_after"]["unrelated_hint"] - row["drift_after"]["turn_only"]
    assert same["difference"]["drift_after"][0] == pytest.approx(difference)
    report = (out / "report.md").read_text()
    assert "| turn_only |" in report and "| turn_only_anchor |" in report and "Matched target success" in report
    assert "normalisation per_target_token" in report and "lr 0.05" in report
    assert "At the last step, unrelated_hint against turn_only" in report
    assert "unrelated_hint (last step) - turn_only" in report
    assert (out / "drift_vs_success.png").stat().st_size > 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["results"]) == set(ARMS)  # the per-run curves: every number of the report recomputes

    capsys.readouterr()
    assert json.dumps(exp.main(args)) == json.dumps(analysis)  # read back: no arm trains again
    assert "[exp]" not in capsys.readouterr().out
    (out / "unrelated_hint" / "seed0" / "result.json").unlink()  # an arm-seed that has not finished is left out
    (out / "t_to_end").rename(out / "sequence")  # a first-grid folder: its arm under its name then
    partial = exp.main(["--report-only", "--out", str(out)])  # the folder's own settings, whatever the flags
    assert set(partial["arms"]) == set(ARMS) - {"unrelated_hint"} and set(partial["comparisons"]) == MATCHED
    for arm in ("whole_episode", "t_to_end"):
        assert json.dumps(partial["comparisons"][arm]) == json.dumps(analysis["comparisons"][arm])
    assert "[exp]" not in capsys.readouterr().out  # nothing trained, the missing arm-seed included
    assert "lr 0.05" in (out / "report.md").read_text()
    with pytest.raises(SystemExit, match="no finished arm-seed"):
        exp.main(["--report-only", "--out", str(tmp_path / "empty"), "--model", str(tiny_model_dir)])
    with pytest.raises(ConfigError, match="other settings"):
        exp.main([*args[:3], "2", *args[4:]])


def test_turn_kl_scope_trainer_placement_comes_from_the_fit_flags(experiment_module, tiny_model_dir, monkeypatch):
    """CPU and default precision unless ``--trainer.*`` flags after ``--`` say otherwise (a GPU run needs no edit)."""
    monkeypatch.chdir(ROOT)
    exp = experiment_module("turn_kl_scope/run")
    args = argparse.Namespace(model=str(tiny_model_dir), steps=2, episodes=2, lr=None, kl_coefficient=1.0,
                              contexts=2, extra=[], normalisation="per_target_token", normalisation_constant=96.0,
                              anchor_weight=0.5, proximal=0.3)  # fmt: skip
    module, _, placement = exp.build(args, 0, "turn_only")
    assert placement == {"accelerator": "cpu", "precision": None}
    spec = module.turn_kl
    assert (spec.scope, spec.anchor_weight, spec.proximal) == ("turn", 0.0, False)
    assert spec.normalisation == "per_target_token"
    assert module.hparams.lr == 1e-4 and module.hparams.drift_episodes == 0  # the config's lr; no episode set aside
    args.extra = ["--trainer.precision=bf16-mixed"]  # (an accelerator=gpu flag takes the same path; no GPU here)
    args.lr, args.normalisation = 1e-3, "constant"
    module, _, placement = exp.build(args, 0, "turn_only_anchor")
    assert placement == {"accelerator": "cpu", "precision": "bf16-mixed"} and module.hparams.lr == 1e-3
    spec = module.turn_kl
    assert (spec.anchor_weight, spec.normalisation, spec.normalisation_constant) == (0.5, "constant", 96.0)
    spec = exp.build(args, 0, "proximal")[0].turn_kl
    assert (spec.proximal, spec.proximal_clip, spec.anchor_weight) == (True, 0.3, 0.0)
    assert exp.build(args, 0, "t_to_end")[0].turn_kl.scope == "sequence"


def test_the_hint_goes_before_the_target_turn_or_before_turn_0(experiment_module):
    exp = experiment_module("turn_kl_scope/run")
    sample = argparse.Namespace(context=argparse.Namespace(data={"target_turn": 3}))
    assert [(h.turn, h.text) for h in exp.TurnHint("x").hints(sample)] == [(3, "x")]
    assert [h.turn for h in exp.TurnHint("x", at="start").hints(sample)] == [0]
