"""``configs/gym/grpo.yaml`` through the real ``propel`` CLI: its config prints, and one GRPO step with the tiny model
runs on reasoning-gym questions, logging the reward per dataset next to a TRL-style reward function named by its
import path in YAML."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from propel.testing.plain_configs import read_config_files
from propel.testing.wandb_offline import find_run_file, read_history

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "configs/gym/grpo.yaml"
BASE = ROOT / "configs/grpo/base.yaml"


@pytest.fixture(autouse=True)
def rg(require):
    return require("reasoning_gym")


def test_print_config():
    cmd = [sys.executable, "-m", "propel.cli", "fit", "-c", str(BASE), "-c", str(CONFIG), "--print_config"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    datasets = read_config_files([BASE, CONFIG])["data"]["init_args"]["tasks"]["init_args"]["datasets"]
    for needle in (
        "propel.tasks.ReasoningGymTasks",
        "propel.rewards.ReasoningGymReward",
        "shots: 2",
        *(f"name: {d['name']}" for d in datasets),
    ):
        assert needle in out.stdout, needle


def test_one_step_with_the_tiny_model(tmp_path, tiny_model_dir, monkeypatch):
    import wandb

    from propel.cli import main

    (tmp_path / "gym_user_rewards.py").write_text(
        textwrap.dedent(
            """
            def short_answer(prompts, completions, answer, **kwargs):
                return [1.0 / (1 + len(c[0]["content"])) for c in completions]
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cfg = read_config_files([BASE, CONFIG])
    trainer = cfg["trainer"]
    trainer["default_root_dir"] = str(tmp_path / "run")  # checkpoints and adapters follow it
    trainer.update(max_steps=1, accelerator="cpu", enable_progress_bar=False, enable_model_summary=False)
    trainer["logger"] = {
        "class_path": "propel.loggers.PropelWandbLogger",
        "init_args": {"save_dir": str(tmp_path / "runs"), "offline": True, "id": "gym-test"},
    }
    trainer["callbacks"] = [c for c in trainer["callbacks"] if "ModelCheckpoint" not in c["class_path"]]
    for c in trainer["callbacks"]:
        if c["class_path"].endswith("RewardCurves"):
            c["init_args"]["dirpath"] = str(tmp_path / "curves")
    trainer["enable_checkpointing"] = False
    init = cfg["model"]["init_args"]
    init.update(model=str(tiny_model_dir), group_size=2, max_new_tokens=8, micro_batch_size=4)
    init["lora"] = {"r": 4, "alpha": 8}
    init["rewards"].append(
        {"class_path": "propel.rewards.TRLRewardFunction", "init_args": {"function": "gym_user_rewards.short_answer"}}
    )
    cfg["data"]["init_args"]["contexts_per_step"] = 4
    path = tmp_path / "gym.yaml"
    path.write_text(json.dumps(cfg))
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        main(["fit", "-c", str(path)])
    finally:
        torch.set_num_threads(before)
    wandb.finish()
    deadline = time.monotonic() + 60  # the W&B service writes the run file asynchronously, even after finish
    while True:
        history = read_history(find_run_file(tmp_path / "runs").parent)
        row = next((r for r in history if "train/reward/gym/mean" in r), None)
        if row is not None or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert row is not None, history
    per_dataset = {k: v for k, v in row.items() if k.startswith("train/reward/gym/") and k.endswith("/n")}
    names = {d["name"] for d in cfg["data"]["init_args"]["tasks"]["init_args"]["datasets"]}
    assert per_dataset and {k.split("/")[3] for k in per_dataset} <= names
    assert sum(per_dataset.values()) == 4 * 2  # every sample counted under its own dataset
    assert 0.0 < row["train/reward/short_answer/mean"] <= 1.0  # the TRL-style function ran, by import path


@pytest.mark.real_model
def test_the_bundled_model_partly_solves_the_mix(real_model):
    """The config's point: SmolLM2-135M solves some of its questions, not all, so GRPO groups have reward variance."""
    from propel.cli.lightning_cli import resolve_lightning
    from propel.engines.engine import SamplingSpec
    from propel.engines.hf import HFEngine
    from propel.rewards import ReasoningGymReward
    from propel.rollouts.single_turn import sample_single_turn
    from propel.tasks import ReasoningGymTasks

    cfg = resolve_lightning("fit", read_config_files([BASE, CONFIG]))  # every default filled in (temperature)
    init = cfg["model"]["init_args"]
    model, tokenizer = real_model
    contexts = ReasoningGymTasks(**cfg["data"]["init_args"]["tasks"]["init_args"]).contexts(6, seed=0)
    sampling = SamplingSpec(n=4, max_new_tokens=init["max_new_tokens"], temperature=init["temperature"])
    torch.manual_seed(0)
    groups = sample_single_turn(HFEngine(model, tokenizer), contexts, sampling)
    scores = ReasoningGymReward()([s for g in groups for s in g])
    solved = float((scores == 1.0).float().mean())
    assert 0.0 < solved < 1.0, scores.tolist()
    assert any(len(set(scores[i * 4 : (i + 1) * 4].tolist())) > 1 for i in range(len(groups)))
    print(f"bundled model on the config's mix: {solved:.3f} of {scores.numel()} answers exact")
