"""What a finished stage hands on (``propel.pipeline.outputs``): each row reaches its stage only when its source
stage runs before it, waits (with an error naming the source) while that stage has not finished, and a GRPO stage cut
short resumes from its own checkpoint before the one it was handed."""

from __future__ import annotations

import json

import pytest

from propel.errors import ConfigError
from propel.pipeline.outputs import HANDED_ON, HandOn, StageOutputs, hand_on, with_outputs
from propel.pipeline.stage_configs import load_pipeline_config
from propel.pipeline.stages import start_checkpoint

WARM = ("stages=[warm_start,label,probe,grpo,gate_arm,evaluate]", "warm_start.trainer.max_steps=2",
        "grpo.trainer.max_steps=3")  # fmt: skip
PLAIN = ("stages=[label,probe,grpo,evaluate]", "grpo.trainer.max_steps=3")


def _finish(cfg, stage: str, checkpoint: bool = True, **summary) -> None:
    folder = cfg.root / stage
    (folder / "checkpoints").mkdir(parents=True, exist_ok=True)
    if checkpoint:
        (folder / "checkpoints" / "last.ckpt").write_text("weights")
    (folder / "summary.json").write_text(json.dumps(summary))


def test_a_row_names_an_output_a_stage_has():
    with pytest.raises(ValueError, match="source must be <stage>:<one of"):
        HandOn("warm_start:weights", "label.model.init_args.adapter", "no such output")
    assert {row.output for row in HANDED_ON} <= {"adapter", "checkpoint"}


def test_outputs_are_read_from_the_finished_stages_folder(tmp_path):
    cfg = load_pipeline_config(None, [f"workdir={tmp_path}", *WARM])
    assert StageOutputs.read(cfg, "warm_start") is None
    _finish(cfg, "warm_start", adapter="a/step-2")
    out = StageOutputs.read(cfg, "warm_start")
    assert out.adapter == "a/step-2" and out.checkpoint == str(tmp_path / "warm_start/checkpoints/last.ckpt")
    assert out.pool is None and out.artifact is None


def test_each_stage_takes_the_warm_starts_outputs_once_it_has_finished(tmp_path):
    cfg = load_pipeline_config(None, [f"workdir={tmp_path}", *WARM])
    for stage, run in (("label", None), ("probe", None), ("grpo", None), ("gate_arm", None), ("evaluate", "trained")):
        if run is None:
            with pytest.raises(ConfigError, match=f"the {stage} stage takes the warm_start stage's"):
                hand_on(cfg, stage)
    _finish(cfg, "warm_start", adapter="w/step-2")
    ckpt = str(tmp_path / "warm_start/checkpoints/last.ckpt")
    assert hand_on(cfg, "label") == {"model.init_args.adapter": "w/step-2"}
    assert hand_on(cfg, "probe") == {"rvp.adapter": "w/step-2"}
    assert hand_on(cfg, "grpo") == {"ckpt_path": ckpt} == hand_on(cfg, "gate_arm")
    assert hand_on(cfg, "evaluate", run="warm_start") == {"model.init_args.adapter": "w/step-2"}
    assert with_outputs(cfg, "label")["model"]["init_args"]["adapter"] == "w/step-2"
    assert cfg.configs["label"]["model"]["init_args"].get("adapter") is None  # the composed config is not touched
    assert with_outputs(cfg, "grpo").get("ckpt_path") is None  # propel fit takes the checkpoint as an argument
    assert start_checkpoint(cfg, "grpo") == tmp_path / "warm_start/checkpoints/last.ckpt"
    # the trained policy only once the GRPO stage has finished, and a GRPO stage cut short resumes from its own
    with pytest.raises(ConfigError, match="the evaluate stage takes the grpo stage's adapter"):
        hand_on(cfg, "evaluate", run="trained")
    _finish(cfg, "grpo", adapter="g/step-3")
    assert hand_on(cfg, "evaluate", run="trained") == {"model.init_args.adapter": "g/step-3"}
    assert start_checkpoint(cfg, "grpo") == tmp_path / "grpo/checkpoints/last.ckpt"


def test_a_warm_start_without_its_adapter_or_checkpoint_is_not_finished(tmp_path):
    cfg = load_pipeline_config(None, [f"workdir={tmp_path}", *WARM])
    _finish(cfg, "warm_start", checkpoint=False)  # a summary, but no adapter and no checkpoint
    with pytest.raises(ConfigError, match=r"names no adapter"):
        hand_on(cfg, "label")
    with pytest.raises(ConfigError, match=r"names no checkpoint"):
        start_checkpoint(cfg, "grpo")


def test_without_a_warm_start_nothing_is_handed_on_but_the_trained_policy(tmp_path):
    cfg = load_pipeline_config(None, [f"workdir={tmp_path}", *PLAIN])
    assert hand_on(cfg, "label") == {} == hand_on(cfg, "probe") == hand_on(cfg, "grpo")
    assert with_outputs(cfg, "label") is cfg.configs["label"]
    assert start_checkpoint(cfg, "grpo") is None
    assert hand_on(cfg, "evaluate", run="warm_start") == {}
    _finish(cfg, "grpo", adapter="g/step-3")
    assert hand_on(cfg, "evaluate", run="trained") == {"model.init_args.adapter": "g/step-3"}


def test_no_rvp_sample_waits_for_no_adapter(tmp_path):
    cfg = load_pipeline_config(None, [f"workdir={tmp_path}", *WARM, "probe.rvp.contexts=0"])
    assert hand_on(cfg, "probe") == {}
