"""The pipeline's warm start: GRPO against the validity gate alone, which the GRPO stage continues against the probe.

The toy run of ``test_pipeline_e2e`` (tiny model, seeded labeled pool) with ``warm_start`` before ``grpo``: the GRPO
stage resumes the warm start's checkpoint (its global step, LoRA weights and optimizer), the evaluation adds the warm
start as a policy and compares the trained one with it, and the report says what each did.
"""

from __future__ import annotations

import json

import pytest
import torch

from propel.errors import ConfigError
from propel.pipeline.run import run_pipeline
from propel.pipeline.stage_configs import load_pipeline_config
from propel.pipeline.stages import csv_metrics
from tests.pipeline.test_pipeline_e2e import _toy_config

WARM = ("stages=[label,probe,warm_start,grpo,evaluate]", "warm_start.trainer.max_steps=2", "grpo.trainer.max_steps=3")


def _rewards(config: dict) -> list[str]:
    return [r["class_path"].rsplit(".", 1)[1] for r in config["model"]["init_args"]["rewards"]]


def test_grpo_continues_the_gate_only_warm_start_and_evaluation_compares_the_two(tmp_path, tiny_model_dir, monkeypatch):
    cfg = _toy_config(tmp_path, tiny_model_dir, monkeypatch, *WARM)
    warm, grpo = cfg.configs["warm_start"], cfg.configs["grpo"]
    # the warm start is the GRPO stage's run with the gate for its reward, its own steps and its own folders
    assert _rewards(warm) == ["ValidityReward"] and _rewards(grpo) == ["ProbeReward"]
    assert warm["trainer"]["max_steps"] == 2 and grpo["trainer"]["max_steps"] == 3
    assert warm["trainer"]["default_root_dir"] == str(cfg.root / "warm_start")
    assert warm["model"]["init_args"]["lr"] == grpo["model"]["init_args"]["lr"]  # the grpo section's keys apply
    assert warm["model"]["init_args"]["group_size"] == grpo["model"]["init_args"]["group_size"] == 2

    summaries = run_pipeline(cfg)
    root = cfg.root
    assert list(summaries) == ["label", "probe", "warm_start", "grpo", "evaluate"]
    # the GRPO stage continued the warm start: its steps are 3 (of which the warm start's 2), it logged only its own
    warm_ckpt = torch.load(root / "warm_start" / "checkpoints" / "last.ckpt", weights_only=False, map_location="cpu")
    grpo_ckpt = torch.load(root / "grpo" / "checkpoints" / "last.ckpt", weights_only=False, map_location="cpu")
    assert warm_ckpt["global_step"] == 2 and grpo_ckpt["global_step"] == 3
    assert summaries["warm_start"]["steps"] == 2 and summaries["grpo"]["steps"] == 1
    assert csv_metrics(root / "grpo")["step"] == [2]  # the step after the warm start's last (0-based)
    assert summaries["grpo"]["adapter"].endswith("step-3")
    # the evaluation: base, warm start and trained; trained - warm start is what the probe reward added
    evaluate = summaries["evaluate"]
    assert {"base", "warm_start", "trained"} <= set(evaluate)
    assert evaluate["warm_start"]["adapter"] == summaries["warm_start"]["adapter"]
    assert "valid_rate" in evaluate["lift_vs_warm_start"] and "exact_utility" in evaluate["lift"]
    compared = (root / "evaluate" / "vs_warm_start" / "compare.md").read_text()
    assert "| warm_start | trained |" in compared
    report = (root / "report" / "report.md").read_text()
    for heading in (
        "## Warm start: GRPO against the validity gate alone",
        "## GRPO against the probe reward, continuing the warm start",
        "## Evaluation: the warm start vs trained (the probe reward's own contribution)",
    ):
        assert heading in report
    assert (root / "report" / "warm_start_curves.png").exists()
    assert report.count("**Verdict:** ") == 6  # each stage's, and the warm start vs trained as evaluation words it
    assert "(over 4 and 4 tasks)" in report.split("the probe reward's own contribution)")[1]
    # a rerun skips every stage; the GRPO stage never starts over from the warm start
    again = run_pipeline(cfg)
    assert json.dumps(again, sort_keys=True) == json.dumps(summaries, sort_keys=True)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (("stages=[label,probe,warm_start,grpo]",), r"'warm_start.trainer.max_steps': the warm start's steps"),
        (WARM[:2] + ("grpo.trainer.max_steps=2",), r"'grpo.trainer.max_steps': 2 is not beyond the warm start's 2"),
        (("stages=[label,probe,grpo,warm_start]",), r"'stages': warm_start runs before grpo"),
    ],
)
def test_a_warm_start_the_grpo_stage_cannot_continue_is_refused_before_stage_one(tmp_path, overrides, expected):
    with pytest.raises(ConfigError, match=expected):
        load_pipeline_config(None, [f"workdir={tmp_path / 'run'}", *overrides])
    assert not (tmp_path / "run").exists()


def test_the_warm_start_takes_the_reward_its_section_gives(tmp_path):
    """A probe reward named in the warm start's section trains on the probe stage's artifact (a link, as GRPO's)."""
    cfg = load_pipeline_config(
        None,
        [
            f"workdir={tmp_path}",
            *WARM,
            "warm_start.model.init_args.rewards=[{class_path: propel.rewards.probe_reward.ProbeReward}]",
        ],
    )
    reward = cfg.configs["warm_start"]["model"]["init_args"]["rewards"][0]
    assert reward["init_args"]["artifact"] == str(tmp_path / "probe" / "artifact")
    assert {r["target"] for r in cfg.links} >= {"warm_start.model.init_args.rewards[ProbeReward].artifact"}
