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


def _fit(tmp_path: Path, model: str, held_out: bool):
    from propel.cli.lightning_cli import PropelCLI

    cfg = read_config_files(CONFIGS)
    trainer = cfg["trainer"]
    trainer.update(max_steps=3, accelerator="cpu", enable_progress_bar=False, enable_model_summary=False)
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
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    lora = {k: v.detach().clone() for k, v in cli.model.policy.named_parameters() if "lora_" in k}
    return cli, lora


@pytest.mark.timeout(600)
def test_held_out_rewards_measure_each_checkpoint_and_leave_training_as_it_was(tmp_path, tiny_model_dir):
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
        assert all(v != v or -1.0 <= v <= 6.0 for _, v in points), name  # NaN only where nothing was scored
    # the measurement samples in a forked random state: the training run is the one it is without it
    train_a = json.loads((tmp_path / "a" / "curves" / "reward_curves.json").read_text())
    train_b = json.loads((tmp_path / "b" / "curves" / "reward_curves.json").read_text())
    assert train_a == train_b
    assert measured.keys() == plain.keys() and all(torch.equal(measured[k], plain[k]) for k in measured)

    (callback,) = [c for c in cli.trainer.callbacks if type(c).__name__ == "HeldOutRewards"]
    state = callback.state_dict()
    fresh = type(callback)(callback.tasks, dirpath=str(tmp_path / "resumed"))
    fresh.load_state_dict(json.loads(json.dumps(state)))  # through a checkpoint's serialisation
    assert fresh.measured_steps() == [0, 2, 3] and fresh.curves == callback.curves  # a resume measures no step twice


def test_held_out_rewards_refuse_bad_settings():
    from propel.callbacks.held_out_rewards import HeldOutRewards
    from propel.tasks.triage import TriageTickets

    with pytest.raises(ConfigError, match="every_n_steps"):
        HeldOutRewards(TriageTickets(split="eval"), dirpath="x", every_n_steps=0)
