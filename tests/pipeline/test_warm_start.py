"""The pipeline's warm start: GRPO against the validity gate alone, which the GRPO stage continues against the probe.

The toy run of ``test_pipeline_e2e`` (tiny model, seeded labeled pool) with ``warm_start`` before ``grpo``: the GRPO
stage resumes the warm start's checkpoint (its global step, LoRA weights and optimizer), the evaluation adds the warm
start as a policy and compares the trained one with it, and the report says what each did.
"""

from __future__ import annotations

import json

import pytest
import torch
import yaml

from propel.errors import ConfigError
from propel.pipeline.run import run_pipeline
from propel.pipeline.stage_configs import load_pipeline_config
from propel.pipeline.stages import csv_metrics
from tests.pipeline.test_pipeline_e2e import _toy_config

WARM = ("stages=[label,probe,warm_start,grpo,evaluate]", "warm_start.trainer.max_steps=2", "grpo.trainer.max_steps=3")
FIRST = ("stages=[warm_start,label,probe,grpo,gate_arm,evaluate]",) + WARM[1:]
"""The demo's order: the warm start first, so the label stage labels its (mostly valid) tasks; the gate arm
continues it with the gate alone, the policy the trained generator is compared with."""


def _rewards(config: dict) -> list[str]:
    return [r["class_path"].rsplit(".", 1)[1] for r in config["model"]["init_args"]["rewards"]]


def test_grpo_continues_the_gate_only_warm_start_and_evaluation_compares_the_two(tmp_path, tiny_model_dir, monkeypatch):
    """In the demo's order: the warm start first, whose tasks the label stage labels."""
    cfg = _toy_config(tmp_path, tiny_model_dir, monkeypatch, *FIRST)
    warm, grpo = cfg.configs["warm_start"], cfg.configs["grpo"]
    # the warm start is the GRPO stage's run with the gate for its reward, its own steps and its own folders
    assert _rewards(warm) == ["ValidityReward"] and _rewards(grpo) == ["ProbeReward"]
    assert warm["trainer"]["max_steps"] == 2 and grpo["trainer"]["max_steps"] == 3
    assert warm["trainer"]["default_root_dir"] == str(cfg.root / "warm_start")
    assert warm["model"]["init_args"]["lr"] == grpo["model"]["init_args"]["lr"]  # the grpo section's keys apply
    assert warm["model"]["init_args"]["group_size"] == grpo["model"]["init_args"]["group_size"] == 2

    gate = cfg.configs["gate_arm"]  # the gate arm: the GRPO stage's settings, the gate's reward, the GRPO stage's steps
    assert _rewards(gate) == ["ValidityReward"] and gate["trainer"]["max_steps"] == grpo["trainer"]["max_steps"]
    assert gate["trainer"]["default_root_dir"] == str(cfg.root / "gate_arm")
    assert gate["model"]["init_args"]["lr"] == grpo["model"]["init_args"]["lr"]

    summaries = run_pipeline(cfg)
    root = cfg.root
    assert list(summaries) == ["warm_start", "label", "probe", "grpo", "gate_arm", "evaluate"]
    # the label stage labeled the warm start's policy: its adapter on the generator, named in the summary
    label_config = yaml.safe_load((root / "label" / "config.yaml").read_text())
    assert label_config["model"]["init_args"]["adapter"] == summaries["warm_start"]["adapter"]
    assert summaries["label"]["adapter"] == summaries["warm_start"]["adapter"]
    assert cfg.configs["label"]["model"]["init_args"].get("adapter") is None  # composed before the warm start ran
    # the probe's RVP sample (selection's tiebreak) is the warm start's too: the policy the GRPO stage continues
    probe_config = yaml.safe_load((root / "probe" / "config.yaml").read_text())
    assert probe_config["rvp"]["adapter"] == summaries["warm_start"]["adapter"]
    # the GRPO stage continued the warm start: its steps are 3 (of which the warm start's 2), it logged only its own
    warm_ckpt = torch.load(root / "warm_start" / "checkpoints" / "last.ckpt", weights_only=False, map_location="cpu")
    grpo_ckpt = torch.load(root / "grpo" / "checkpoints" / "last.ckpt", weights_only=False, map_location="cpu")
    assert warm_ckpt["global_step"] == 2 and grpo_ckpt["global_step"] == 3
    assert summaries["warm_start"]["steps"] == 2 and summaries["grpo"]["steps"] == 1
    assert csv_metrics(root / "grpo")["step"] == [2]  # the step after the warm start's last (0-based)
    assert summaries["grpo"]["adapter"].endswith("step-3")
    gate_ckpt = torch.load(root / "gate_arm" / "checkpoints" / "last.ckpt", weights_only=False, map_location="cpu")
    assert gate_ckpt["global_step"] == 3 and summaries["gate_arm"]["steps"] == 1  # it continued the warm start too
    assert summaries["gate_arm"]["signal_cost"]["solver_trials_offline"] == 0  # it read no labels
    # the evaluation: base, warm start, gate arm and trained; trained - gate arm is what the reward added
    evaluate = summaries["evaluate"]
    assert {"base", "warm_start", "gate_arm", "trained"} <= set(evaluate)
    assert evaluate["warm_start"]["adapter"] == summaries["warm_start"]["adapter"]
    assert evaluate["gate_arm"]["adapter"] == summaries["gate_arm"]["adapter"]
    assert "valid_rate" in evaluate["lift_vs_warm_start"] and "exact_utility" in evaluate["lift"]
    assert {"exact_utility", "exact_utility_lenient"} <= set(evaluate["lift_vs_gate_arm"])
    assert "| warm_start | trained |" in (root / "evaluate" / "vs_warm_start" / "compare.md").read_text()
    assert "| gate_arm | trained |" in (root / "evaluate" / "vs_gate_arm" / "compare.md").read_text()
    report = (root / "report" / "report.md").read_text()
    reward = summaries["probe"]["reward"]
    for heading in (
        "## Summary",
        "## Evaluation: the gate-continued arm vs trained (what the reward added)",
        "## Evaluation: the warm start vs trained",
        "## Task pool (collect + label of the warm start's tasks)",
        "## Warm start: GRPO against the validity gate alone",
        f"## GRPO against the probe stage's reward (`{reward}`), continuing the warm start",
        "## The gate-continued arm: GRPO against the validity gate alone from the warm start",
    ):
        assert heading in report
    summary = report.split("## Summary")[1].split("\n## ")[0]  # the opening: what ran, the headline, the caveats
    assert "- `gate_arm`: 1 GRPO step against the validity gate alone" in summary
    assert "**Strict yield**" in summary and "against gate arm" in summary and "Lenient yield" in summary
    assert f"**The reward** is `{reward}`" in summary and "**Monitors of `grpo`**" in summary
    assert report.index("## Summary") < report.index("## Evaluation: the gate-continued") < report.index("## Task pool")
    assert report.index("## Warm start: GRPO") < report.index("## Task pool")  # the stages in the order they ran
    assert (root / "report" / "warm_start_curves.png").exists() and (root / "report" / "links.md").exists()
    assert "(over 4 and 4 tasks)" in report.split("(what the reward added)")[1]
    # a rerun skips every stage; the GRPO stage never starts over from the warm start
    again = run_pipeline(cfg)
    assert json.dumps(again, sort_keys=True) == json.dumps(summaries, sort_keys=True)


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (("stages=[label,probe,warm_start,grpo]",), r"'warm_start.trainer.max_steps': the warm start's steps"),
        (WARM[:2] + ("grpo.trainer.max_steps=2",), r"'grpo.trainer.max_steps': 2 is not beyond the warm start's 2"),
        (
            ("stages=[label,probe,grpo,warm_start]",),
            r"'stages': grpo reads what warm_start writes, so it runs after it",
        ),
    ],
)
def test_a_warm_start_the_grpo_stage_cannot_continue_is_refused_before_stage_one(tmp_path, overrides, expected):
    with pytest.raises(ConfigError, match=expected):
        load_pipeline_config(None, [f"workdir={tmp_path / 'run'}", *overrides])
    assert not (tmp_path / "run").exists()


def test_the_label_stage_labels_the_warm_starts_tasks_only_when_it_comes_after_it(tmp_path):
    """Before the warm start it labels the base generator's tasks; after it, it waits for the warm start's
    adapter (one line naming the missing summary when asked to run before the warm start has finished)."""
    from propel.pipeline.outputs import with_outputs

    before = load_pipeline_config(None, [f"workdir={tmp_path / 'a'}", *WARM])
    assert with_outputs(before, "label")["model"]["init_args"].get("adapter") is None
    after = load_pipeline_config(None, [f"workdir={tmp_path / 'b'}", *FIRST])
    with pytest.raises(ConfigError, match=r"takes the warm_start stage's adapter \(labels the warm start's tasks"):
        with_outputs(after, "label")


@pytest.mark.parametrize(
    ("stages", "expected"),
    [
        ("[probe,label,grpo,evaluate]", r"'stages': probe reads what label writes"),
        ("[label,probe,evaluate,grpo]", r"'stages': evaluate reads what grpo writes"),
    ],
)
def test_a_stage_listed_before_the_stage_it_reads_is_refused(tmp_path, stages, expected):
    with pytest.raises(ConfigError, match=expected):
        load_pipeline_config(None, [f"workdir={tmp_path}", f"stages={stages}"])


def test_a_warm_start_before_the_probe_cannot_train_on_it(tmp_path):
    probe_reward = "warm_start.model.init_args.rewards=[{class_path: propel.rewards.probe_reward.ProbeReward}]"
    with pytest.raises(ConfigError, match=r"'warm_start.model.init_args.rewards': a probe reward reads the probe"):
        load_pipeline_config(None, [f"workdir={tmp_path}", *FIRST, probe_reward])


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


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        (("stages=[label,probe,grpo,gate_arm,evaluate]",), r"'stages': gate_arm continues the warm start"),
        (("stages=[warm_start,label,probe,grpo,evaluate,gate_arm]",) + WARM[1:], r"evaluate reads what gate_arm"),
        (
            FIRST + ("gate_arm.model.init_args.rewards=[{class_path: propel.rewards.ValidityReward}]",),
            r"'gate_arm.model.init_args.rewards': the gate arm's reward is the validity gate alone",
        ),
    ],
)
def test_a_gate_arm_without_its_warm_start_or_with_its_own_reward_is_refused(tmp_path, overrides, expected):
    with pytest.raises(ConfigError, match=expected):
        load_pipeline_config(None, [f"workdir={tmp_path / 'run'}", *overrides])


def test_a_stage_that_continues_the_warm_start_reports_only_the_alarms_it_raised(tmp_path):
    """The GRPO stage restores the warm start's collapse detector, alarms included: its summary keeps its own."""
    from propel.callbacks.collapse import ALARMS
    from propel.pipeline.stages import stage_alarms

    cfg = load_pipeline_config(None, [f"workdir={tmp_path / 'run'}", *FIRST])
    early = "propel: mode collapse or degeneration suspected at step 12: monitor/degenerate 0.111 -> 0.364"
    late = "propel: mode collapse or degeneration suspected at step 30: monitor/degenerate 0.111 -> 0.500"
    for stage, alarms in (("warm_start", [early]), ("grpo", [early, late]), ("gate_arm", [early])):
        (cfg.root / stage).mkdir(parents=True)
        (cfg.root / stage / ALARMS).write_text(json.dumps(alarms))
    assert stage_alarms(cfg, "warm_start") == [early]
    assert stage_alarms(cfg, "grpo") == [late] and stage_alarms(cfg, "gate_arm") == []
    no_warm = load_pipeline_config(None, [f"workdir={tmp_path / 'run'}"])  # no warm start: nothing is inherited
    assert stage_alarms(no_warm, "grpo") == [early, late]
