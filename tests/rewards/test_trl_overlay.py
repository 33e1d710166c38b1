"""The documented recipe for adding a TRL reward function to a task (``docs/guide/bring_your_own.md``) adds it: the
overlay's ``rewards+:`` appends to the task's rewards where a plain ``rewards:`` would replace them, and the policy
would train on the user's function alone."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from propel.cli.lightning_cli import resolve_lightning_args

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "guide" / "bring_your_own.md"


def documented_overlay() -> tuple[str, list[str]]:
    """The guide's YAML block that adds a TRL reward, and the config files its comment composes it with."""
    blocks = re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(), flags=re.S)
    (block,) = [b for b in blocks if "TRLRewardFunction" in b]
    command = re.search(r"propel fit (.*)", block).group(1)
    files = re.findall(r"-c (\S+)", command)
    return block, files[:-1]  # the last -c is the overlay itself


def rewards(files: list[str], overlay: Path) -> list[str]:
    config = resolve_lightning_args("fit", [a for f in [*files, str(overlay)] for a in ("-c", f)])
    return [r["class_path"] for r in config["model"]["init_args"]["rewards"]]


def test_the_documented_trl_overlay_adds_the_function_to_the_tasks_rewards(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    block, files = documented_overlay()
    assert files == ["configs/grpo/base.yaml", "configs/code/testsuite.yaml"]
    task = yaml.safe_load((ROOT / files[1]).read_text())["model"]["init_args"]["rewards"]
    overlay = tmp_path / "my_reward.yaml"
    overlay.write_text(block)
    got = rewards(files, overlay)
    assert got[: len(task)] == [r if isinstance(r, str) else r["class_path"] for r in task]
    assert got[0] == "propel.rewards.TestSuiteReward" and got[-1] == "propel.rewards.TRLRewardFunction"
    assert len(got) == len(task) + 1
    overlay.write_text(block.replace("rewards+:", "rewards:"))  # what the guide said before: the task's reward gone
    assert rewards(files, overlay) == ["propel.rewards.TRLRewardFunction"]
