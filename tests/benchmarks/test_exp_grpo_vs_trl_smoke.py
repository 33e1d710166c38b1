"""A short run of ``benchmarks/exp_grpo_vs_trl.py`` (tiny model, two steps, one seed, both trainers) so the
experiment's command cannot rot: both trainers see the same questions in the same order, the report is written, a
rerun reuses the finished runs, and a folder made with other settings is refused. The measured table is the
experiment's own: ``make exp-grpo-vs-trl``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from propel.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_grpo_vs_trl_experiment_runs_both_trainers_on_the_same_questions(
    benchmark_module, require, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    require("trl")
    exp = benchmark_module("exp_grpo_vs_trl")
    out = tmp_path / "exp"
    args = ["--model", str(tiny_model_dir), "--steps", "2", "--seeds", "3", "--prompts", "2", "--group", "2"]
    args += ["--new-tokens", "4", "--boot", "50", "--out", str(out)]
    analysis = exp.main(args)

    propel, trl = (json.loads((out / f"{name}_seed3.json").read_text()) for name in ("propel", "trl"))
    assert propel["questions"] == trl["questions"]  # same questions, same order, step by step
    assert [len(q) for q in propel["questions"]] == [4, 4]  # 2 questions x G=2 answers per step
    assert len(set(propel["questions"][0]) | set(propel["questions"][1])) == 4  # steps draw different questions
    for run in (propel, trl):
        assert len(run["rewards"]) == 2 and all(len(r) == 4 for r in run["rewards"])
        assert all(0.0 <= v <= 1.0 for r in run["rewards"] for v in r)
        assert len(run["step_s"]) == 2 and all(s > 0 for s in run["step_s"])
    assert set(analysis["trainers"]) == {"propel", "trl"} and "difference" in analysis
    for row in analysis["trainers"].values():
        lo, hi = row["last10_ci"]
        assert lo <= row["last10"] <= hi
    report = (out / "report.md").read_text()
    assert "| propel | 1 |" in report and "| trl | 1 |" in report and (out / "curves.png").stat().st_size > 0

    capsys.readouterr()
    assert exp.main(args) == analysis  # the finished runs are read back, not trained again
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[exp]")]
    assert len(lines) == 2 and all("step means" in line for line in lines)  # no "training N steps" line

    with pytest.raises(ConfigError, match="other settings"):
        exp.main([*args[:-2], "--lr", "0.5", "--out", str(out)])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(ConfigError, match="device"):  # the device is a setting: a CPU folder refuses a GPU run
        exp.main([*args, "--device", "gpu"])


def test_grpo_vs_trl_gpu_device_needs_a_visible_gpu(benchmark_module, tmp_path, monkeypatch, capsys):
    exp = benchmark_module("exp_grpo_vs_trl")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        exp.main(["--device", "gpu", "--out", str(tmp_path / "exp")])
    assert "no CUDA GPU" in capsys.readouterr().err and not (tmp_path / "exp").exists()
