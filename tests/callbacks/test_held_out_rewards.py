"""``HeldOutRewards``: every reward component on a fixed held-out set at step 0, every N steps and at the end, for a
real triage GRPO run (tiny model); the measurement leaves the training run exactly as it is without it, and a
resumed run keeps what it measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from propel.errors import ConfigError
from propel.testing.plain_configs import read_config_files

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = [ROOT / "configs/grpo/base.yaml", ROOT / "configs/triage/grpo.yaml"]
PREFIX = 'submit_resolution {"resolution": "'


LENGTH = "def length(prompts, completions, **kwargs):\n    return [len(str(c)) / 100 for c in completions]\n"
"""A weight-0 component that varies with what was sampled (a tiny model's triage answers all score 0)."""


@pytest.fixture
def length_reward(tmp_path_factory, monkeypatch):
    folder = tmp_path_factory.mktemp("rewards")
    (folder / "held_out_length.py").write_text(LENGTH)
    monkeypatch.syspath_prepend(str(folder))


def _fit(tmp_path: Path, model: str, held_out: bool, max_steps: int = 3, ckpt_path: str | None = None):
    from propel.cli.lightning_cli import PropelCLI

    cfg = read_config_files(CONFIGS)
    length = {"function": "held_out_length.length", "weight": 0.0}
    cfg["model"]["init_args"]["rewards"].append({"class_path": "propel.rewards.TRLRewardFunction", "init_args": length})
    trainer = cfg["trainer"]
    trainer.update(max_steps=max_steps, accelerator="cpu", enable_progress_bar=False, enable_model_summary=False)
    trainer.update(logger=False, enable_checkpointing=False, default_root_dir=str(tmp_path / "run"))
    callbacks = [c for c in trainer["callbacks"] if c["class_path"].endswith("RewardCurves")]
    callbacks[0]["init_args"]["dirpath"] = str(tmp_path / "curves")
    if held_out:
        tasks = {
            "class_path": "propel.tasks.triage.TriageTickets",
            "init_args": {"split": "eval", "answer_prefix": PREFIX},
        }
        args = {"tasks": tasks, "dirpath": str(tmp_path / "held_out"), "contexts": 2, "samples": 2, "every_n_steps": 2}
        callbacks.append({"class_path": "propel.callbacks.held_out_rewards.HeldOutRewards", "init_args": args})
    trainer["callbacks"] = callbacks
    init = cfg["model"]["init_args"]
    init.update(model=model, group_size=2, max_new_tokens=12, micro_batch_size=2, lora={"r": 4, "alpha": 8})
    cfg["data"]["init_args"]["contexts_per_step"] = 1
    cfg["data"]["init_args"]["tasks"]["init_args"]["answer_prefix"] = PREFIX
    path = tmp_path / "config.json"
    tmp_path.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg))
    cli = PropelCLI(args=["-c", str(path)], run=False)
    cli.trainer.fit(cli.model, datamodule=cli.datamodule, ckpt_path=ckpt_path)
    lora = {k: v.detach().clone() for k, v in cli.model.policy.named_parameters() if "lora_" in k}
    return cli, lora


@pytest.mark.timeout(600)
def test_held_out_rewards_measure_each_checkpoint_and_leave_training_as_it_was(tmp_path, tiny_model_dir, length_reward):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cli, measured = _fit(tmp_path / "a", str(tiny_model_dir), held_out=True)
        _, plain = _fit(tmp_path / "b", str(tiny_model_dir), held_out=False)
    finally:
        torch.set_num_threads(before)
    curves = json.loads((tmp_path / "a" / "held_out" / "held_out_curves.json").read_text())
    components = ("format", "resolution", "grounding", "calibration", "parsimony", "repetition")
    assert {"total", *components, "format_raw", "resolution_rouge_l", "grounding_gold_f1"} <= set(curves)
    for name, points in curves.items():
        assert [step for step, _ in points] == [0, 2, 3], name  # step 0, every 2 steps, and the end
        assert all(v != v or -1.0 <= v <= 6.0 for _, v in points) or name == "length", name
    assert len({v for _, v in curves["length"]}) > 1  # what was sampled differs between checkpoints
    # the measurement samples in a forked random state: the training run is the one it is without it
    train_a = json.loads((tmp_path / "a" / "curves" / "reward_curves.json").read_text())
    train_b = json.loads((tmp_path / "b" / "curves" / "reward_curves.json").read_text())
    assert train_a == train_b
    assert measured.keys() == plain.keys() and all(torch.equal(measured[k], plain[k]) for k in measured)


@pytest.mark.timeout(600)
def test_a_resumed_run_measures_each_checkpoint_as_an_unbroken_one(tmp_path, tiny_model_dir, length_reward):
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        _fit(tmp_path / "whole", str(tiny_model_dir), held_out=True)
        first, _ = _fit(tmp_path / "cut", str(tiny_model_dir), held_out=True, max_steps=1)
        first.trainer.save_checkpoint(tmp_path / "cut.ckpt")  # stopped after step 1 (no checkpoint), resumed to 3
        _fit(tmp_path / "cut", str(tiny_model_dir), held_out=True, ckpt_path=str(tmp_path / "cut.ckpt"))
    finally:
        torch.set_num_threads(before)
    whole = json.loads((tmp_path / "whole" / "held_out" / "held_out_curves.json").read_text())
    resumed = json.loads((tmp_path / "cut" / "held_out" / "held_out_curves.json").read_text())
    assert set(resumed) == set(whole)
    for name, points in resumed.items():  # the stop's own end is measured too; no step twice; the rest as unbroken
        assert [step for step, _ in points] == [0, 1, 2, 3], name
        assert [p for p in points if p[0] != 1] == whole[name], name


def test_held_out_rewards_refuse_bad_settings():
    from propel.callbacks.held_out_rewards import HeldOutRewards
    from propel.tasks.triage import TriageTickets

    with pytest.raises(ConfigError, match="every_n_steps"):
        HeldOutRewards(TriageTickets(split="eval"), dirpath="x", every_n_steps=0)
