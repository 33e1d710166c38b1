"""The agent configs parse with the CLI's own parser (every class_path, key and value checked, nothing run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from propel.cli.lightning_cli import resolve_lightning
from propel.testing.plain_configs import read_config_files

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "configs/grpo/base.yaml"


def test_agent_grpo_config_resolves():
    cfg = resolve_lightning("fit", read_config_files([BASE, ROOT / "configs/agent/grpo.yaml"]))
    rewards = [r["class_path"] for r in cfg["model"]["init_args"]["rewards"]]
    assert rewards == [
        "propel.rewards.EnvironmentReward",
        "propel.rewards.OverlongPenalty",
        "propel.rewards.TurnRewards",
    ]
    assert cfg["data"]["init_args"]["env"]["init_args"]["malformed_call_reward"] == -0.1


def test_agent_labeling_config_resolves():
    cfg = resolve_lightning("predict", read_config_files([ROOT / "configs/math/label_agent.yaml"]))
    agent = cfg["model"]["init_args"]["solver_agent"]
    assert agent["class_path"] == "propel.rollouts.AgentSolver"
    assert agent["init_args"]["env"]["class_path"] == "propel.envs.ToolEnv"
    bad = read_config_files([ROOT / "configs/math/label_agent.yaml"])
    bad["model"]["init_args"]["solver_agent"]["init_args"]["concurrencyy"] = 2
    with pytest.raises(Exception, match="concurrencyy"):
        resolve_lightning("predict", bad)


def test_distill_config_resolves():
    cfg = resolve_lightning("fit", read_config_files([BASE, ROOT / "configs/agent/distill.yaml"]))
    init = cfg["model"]["init_args"]
    turn_kl = init["turn_kl"]
    assert init["hints"]["class_path"] == "propel.rollouts.hints.ErrorHints" and turn_kl["teacher"] == "live"
    assert turn_kl["divergence"]["kind"] == "forward_kl" and list(turn_kl["temperature_schedule"]) == [1.0, 0.8, 0.6]


def test_grpo_distill_config_resolves():
    cfg = resolve_lightning("fit", read_config_files([BASE, ROOT / "configs/agent/grpo_distill.yaml"]))
    init = cfg["model"]["init_args"]
    assert cfg["model"]["class_path"] == "propel.lit_modules.grpo_turn_kl.GRPOTurnKLModule"
    assert (
        init["group_size"] == 4 and init["turn_kl"]["kl_coefficient"] == 0.05 and init["turn_kl"]["teacher"] == "live"
    )
    assert [r["class_path"] for r in init["rewards"]][0] == "propel.rewards.EnvironmentReward"
    bad = read_config_files([BASE, ROOT / "configs/agent/grpo_distill.yaml"])
    bad["model"]["init_args"]["turn_kl"].update(teacher="ema", ema_decay=0.9)
    assert resolve_lightning("fit", bad)["model"]["init_args"]["turn_kl"]["ema_decay"] == 0.9
