"""GRPO on verifiers environments nobody here wrote, through the real ``propel`` CLI and the shipped config
(``configs/verifiers/grpo.yaml``): staros-stardata's constraint gym from PyPI (single-turn, its rubric a weighted
prosody score plus a weight-0 metrics breakdown) and verifiers' own ``GymEnv`` over gymnasium's Blackjack
(multi-turn: env_response steps the game, a stop condition ends it, the rubric sums the step rewards). Each rubric
function is logged as a component, each sample's reward is the one the environment's own functions give it, and the
reward reaches the advantages (the paying function carries the advantage variance, the loss is computed)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.timeout(480)


@pytest.fixture(scope="module")
def verifiers(require):
    require("stardata.envs.constraint_gym")
    require("gymnasium")
    return require("verifiers.envs.multiturn_env")


def _fit(tmp_path, tiny_model_dir, policy: str, *flags: str) -> list[dict]:
    import vf_policy

    from propel.cli import main

    overlay = tmp_path / "scripted.yaml"
    overlay.write_text(yaml.safe_dump({"trainer": {"callbacks+": [{"class_path": f"vf_policy.{policy}"}]}}))
    vf_policy.STEPS.clear()
    main(
        [
            "fit",
            "-c",
            str(ROOT / "configs/grpo/base.yaml"),
            "-c",
            str(ROOT / "configs/verifiers/grpo.yaml"),
            "-c",
            str(overlay),
            "--model.init_args.model",
            str(tiny_model_dir),
            "--model.init_args.group_size=4",
            "--model.init_args.max_new_tokens=32",
            "--model.init_args.lr=1e-3",
            "--data.init_args.contexts_per_step=2",
            "--trainer.max_steps=2",
            "--trainer.accelerator=cpu",
            "--trainer.logger=false",
            "--trainer.enable_progress_bar=false",
            *flags,
        ]
    )
    assert (tmp_path / "runs/verifiers/checkpoints/last.ckpt").is_file()
    assert len(vf_policy.STEPS) == 2
    return list(vf_policy.STEPS)


def _reached_advantages(steps: list[dict], paying: str) -> None:
    """The paying function's reward varied within some group, carried the advantage variance, and the step trained."""
    shares = [s["metrics"].get(f"train/reward/{paying}/adv_share") for s in steps]
    assert any(share == pytest.approx(1.0) for share in shares if share is not None), shares
    assert all(math.isfinite(s["metrics"]["train/loss"]) for s in steps)
    assert any(s["metrics"]["train/kept_fraction"] > 0 for s in steps)


def test_a_single_turn_environment_from_pypi_trains_with_its_rubric(verifiers, tiny_model_dir, tmp_path, monkeypatch):
    from stardata.envs.constraint_gym import component_metrics, prosody_reward

    monkeypatch.chdir(tmp_path)
    steps = _fit(tmp_path, tiny_model_dir, "ScriptedPoet")
    paying = "rubric.prosody_reward"
    for step in steps:
        state, metrics = step["state"], step["metrics"]
        names = set(state.rewards.components)
        assert names == {paying, "rubric.component_metrics", "rubric.num_turns"}
        assert state.rewards.weights == {paying: 1.0, "rubric.component_metrics": 0.0, "rubric.num_turns": 0.0}
        for key in (paying, "rubric.num_turns"):
            assert f"train/reward/{key}/mean" in metrics
        for i, sample in enumerate(state.samples):
            assert sample.info["turns"] == 1 and sample.info["finish_reason"] == "submitted"
            completion = [{"role": "assistant", "content": sample.completion}]
            info = sample.context.data["row"]["info"]
            assert state.rewards.total[i] == pytest.approx(prosody_reward(completion, info=info))
            assert state.rewards.components["rubric.num_turns"][i] == 1.0
            # the metrics breakdown is a dict: logged per entry, never paid
            assert math.isnan(state.rewards.components["rubric.component_metrics"][i])
            breakdown = component_metrics(completion, info=info)
            logged = state.rewards.logged["rubric.component_metrics_accepted"][i]
            assert logged == pytest.approx(breakdown["accepted"])
    _reached_advantages(steps, paying)


def test_a_multi_turn_environment_trains_with_its_rubric(verifiers, tiny_model_dir, tmp_path, monkeypatch):
    from gymnasium.envs.toy_text.blackjack import BlackjackEnv
    from vf_blackjack import action

    monkeypatch.chdir(tmp_path)
    flags = ["--data.init_args.tasks.init_args.env=vf_blackjack", "--data.init_args.seed=1"]  # seed 1 deals a 10 and a
    steps = _fit(tmp_path, tiny_model_dir, "ScriptedPlayer", *flags)  # 7, which the policy hits: longer games
    paying = "rubric.sum_step_rewards"
    turns = set()
    for step in steps:
        state = step["state"]
        assert set(state.rewards.components) == {paying, "rubric.num_turns"}
        assert f"train/reward/{paying}/mean" in step["metrics"]
        for i, sample in enumerate(state.samples):
            assert sample.infra_error is None
            moves = sample.assistant_texts
            turns.add(len(moves))
            assert [t.role for t in sample.turns] == ["assistant", "user"] * (len(moves) - 1) + ["assistant"]
            game = BlackjackEnv()  # replay the moves the game accepted in a fresh game: the same return
            game.reset(seed=int(sample.context.data["row"]["answer"]))
            expected = 0.0
            for move in moves:
                try:
                    _, reward, over, _, _ = game.step(action(move))
                except ValueError:  # GymEnv ends the game on a reply that is no move
                    break
                expected += reward
                if over:
                    break
            assert state.rewards.total[i] == pytest.approx(expected)
            assert state.rewards.components["rubric.num_turns"][i] == len(moves)
    assert len(turns) > 1  # episodes of different lengths: the game went on over turns
    assert any(torch.isfinite(s["state"].rewards.total).all() for s in steps)
    _reached_advantages(steps, paying)
