"""GRPO on an OpenEnv environment written in the test suite (``openenv_guess``): the shipped config
(``configs/openenv/grpo.yaml``) trains on it through the real ``propel`` CLI, in-process and over a real OpenEnv server
on loopback, with turn rewards equal to the environment's; a server killed mid-episode during a fit makes those
episodes infrastructure failures, left out of the step, and the run goes on."""

from __future__ import annotations

import threading
from functools import partial
from pathlib import Path

import lightning.pytorch as pl
import pytest
import torch
import yaml
from lightning.pytorch.callbacks import Callback

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
GUESS = "openenv_guess.GuessEnvironment"
pytestmark = pytest.mark.timeout(480)


@pytest.fixture(scope="module")
def openenv(require):
    return require("openenv.core")


def _env_rewards(sample) -> list[float | None]:
    """Replays the episode's actions in a fresh in-process environment: its rewards, turn by turn."""
    from openenv_guess import GuessAction, GuessEnvironment

    from propel.engines.tool_calls import parse_tool_call

    env = GuessEnvironment()
    env.reset(seed=sample.context.data["seed"])
    out = []
    for turn in sample.turns:
        if turn.role == "assistant":
            guess = parse_tool_call(turn.text).arguments["guess"]
            out.append(env.step(GuessAction(guess=guess)).reward if 1 <= guess <= 16 else None)
    return out


@pytest.mark.parametrize("mode", ["in_process", "server"])
def test_the_config_trains_grpo_on_an_openenv_environment(mode, openenv, tiny_model_dir, tmp_path, monkeypatch):
    from propel.cli import main
    from propel.rollouts.trajectories import read_trajectories
    from propel.served.process import ServerProcess

    monkeypatch.chdir(tmp_path)  # the config's checkpoints and trajectories land under runs/openenv here
    config = ROOT / "configs/openenv/grpo.yaml"
    overlay = tmp_path / "scripted.yaml"  # the scripted policy (the tiny model writes no calls), after the config's
    overlay.write_text(yaml.safe_dump({"trainer": {"callbacks+": [{"class_path": "openenv_policy.ScriptedGuesser"}]}}))
    server = ServerProcess(GUESS, pythonpath=[HERE]).start() if mode == "server" else None
    where = ["--data.init_args.env.init_args.env", GUESS]
    if server is not None:
        where = ["--data.init_args.env.init_args.env", server.url]
    try:
        main(
            [
                "fit",
                "-c",
                str(ROOT / "configs/grpo/base.yaml"),
                "-c",
                str(config),
                "-c",
                str(overlay),
                *where,
                "--model.init_args.model",
                str(tiny_model_dir),
                "--model.init_args.group_size=2",
                "--model.init_args.max_new_tokens=32",
                "--model.init_args.lr=1e-3",
                "--data.init_args.tasks.init_args.seeds=[2,3,5,6]",
                "--data.init_args.env.init_args.max_turns=5",
                "--trainer.max_steps=2",
                "--trainer.accelerator=cpu",
                "--trainer.logger=false",
                "--trainer.enable_progress_bar=false",
            ]
        )
    finally:
        if server is not None:
            server.stop()
    steps = sorted((tmp_path / "runs/openenv/trajectories").glob("step-*.parquet"))
    assert [p.name for p in steps] == ["step-000000.parquet", "step-000001.parquet"]
    assert (tmp_path / "runs/openenv/checkpoints/last.ckpt").is_file()
    samples = [s for p in steps for s in read_trajectories(p)]
    assert len(samples) == 2 * 2 * 2 and all(s.infra_error is None for s in samples)
    valid_steps = 0
    for s in samples:
        rewards = [t.info.get("reward") for t in s.turns if t.role == "tool"]
        expected = [-0.1 if r is None else r for r in _env_rewards(s)]  # the config's malformed_call_reward
        assert rewards == expected
        valid_steps += sum(r is not None for r in _env_rewards(s))
        assert s.info["reward"] == pytest.approx(sum(r for r in _env_rewards(s) if r is not None))
    assert valid_steps >= len(samples)  # every episode reached the environment


class Steps(Callback):
    def __init__(self):
        self.rows, self.samples = [], []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.rows.append({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")})
        self.samples.append(pl_module.rollout_state.samples)


def test_a_server_killed_mid_episode_leaves_those_episodes_out_and_the_fit_goes_on(openenv, tiny_model_dir):
    from openenv_policy import ScriptedGuesser

    from propel.datamodules.agent_episodes import EpisodeDataModule
    from propel.envs import OpenEnvAgentEnv
    from propel.lit_modules.grpo import GRPOModule
    from propel.losses.policy_gradient import LossSpec
    from propel.models.lora import LoRASpec
    from propel.rewards import TurnRewards
    from propel.served.process import ServerProcess
    from propel.tasks.openenv import OpenEnvTasks

    server = ServerProcess(GUESS, pythonpath=[HERE]).start()
    killed = threading.Event()

    def kill_once(prompt):  # step 0, second round: one-turn games are over, the others lose their server
        if "<|im_start|>tool" in prompt and not killed.is_set():
            killed.set()
            server.kill()
            threading.Timer(1.0, server.start, kwargs={"port": server.port}).start()

    pl.seed_everything(0)
    module = GRPOModule(
        model=str(tiny_model_dir),
        lora=LoRASpec(r=4, alpha=8),
        rewards=[TurnRewards()],
        group_size=2,
        max_new_tokens=32,
        lr=1e-3,
        loss=LossSpec("dapo", beta=0.0),
    )
    data = EpisodeDataModule(
        partial(OpenEnvAgentEnv, server.url, max_turns=5, retries=6, backoff_s=0.5),
        OpenEnvTasks(seeds=[2, 5]),
        contexts_per_step=4,
    )
    steps = Steps()
    trainer = pl.Trainer(
        max_steps=2,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=[steps, ScriptedGuesser(hook=kill_once)],
    )
    try:
        trainer.fit(module, datamodule=data)
    finally:
        server.stop()
    assert killed.is_set() and len(steps.rows) == 2 and trainer.global_step == 2
    first, second = steps.samples
    lost = [s for s in first if s.infra_error]
    assert lost and all(s.context.data["seed"] == 5 and "connection lost" in s.infra_error for s in lost)
    assert all(s.infra_error is None for s in first if s.context.data["seed"] == 2)
    assert steps.rows[0]["train/episode/infra_failures"] == len(lost)
    assert steps.rows[1]["train/episode/infra_failures"] == 0 and all(s.infra_error is None for s in second)
    assert all(torch.isfinite(torch.tensor(r["train/loss"])) for r in steps.rows if "train/loss" in r)
