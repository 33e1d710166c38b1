"""Multi-turn GRPO: agent episodes in a real local sandbox (ToolEnv, one bubblewrapped workspace per episode) train
a tiny random policy; observations stay out of the loss; a resumed run samples and learns what a straight one did."""

from __future__ import annotations

from functools import partial

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from propel.datamodules.agent_episodes import EpisodeDataModule
from propel.envs import ToolEnv
from propel.lit_modules.grpo import GRPOModule
from propel.losses.policy_gradient import LossSpec
from propel.models.lora import LoRASpec
from propel.rewards import EnvironmentReward, FunctionReward, OverlongPenalty
from propel.tasks.shell import ShellTasks


class Steps(Callback):
    def __init__(self):
        self.rows, self.samples = [], []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        m = trainer.callback_metrics
        self.rows.append({k: float(v) for k, v in m.items() if k.startswith("train/")})
        self.samples.append(pl_module.rollout_state.samples)


def _fit(model_dir, steps, tmp_path=None, ckpt_path=None, save=False, sandbox=None):
    pl.seed_everything(0)
    module = GRPOModule(
        model=str(model_dir),
        lora=LoRASpec(r=4, alpha=8),
        rewards=[
            EnvironmentReward(),
            FunctionReward("letters", lambda s: s.completion.count("e") / max(1, len(s.completion))),
            OverlongPenalty(max_length=20, cache=10, weight=0.5),
        ],
        group_size=2,
        max_new_tokens=6,
        lr=1e-2,
        loss=LossSpec("dapo", beta=0.04),
    )
    data = EpisodeDataModule(
        partial(ToolEnv, max_turns=2, command_timeout_s=2.0),
        ShellTasks(),
        contexts_per_step=2,
        sandbox=sandbox,
        execute_cut_turns=True,  # a random model's turns are all cut by max_new_tokens: run them anyway
    )
    rec = Steps()
    callbacks = [rec] + ([ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=1, save_top_k=-1)] if save else [])
    trainer = pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
        enable_checkpointing=save,
    )
    trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
    return module, rec


def test_multi_turn_grpo_trains_on_assistant_tokens_and_resumes_exactly(tiny_model_dir, tmp_path):
    module, rec = _fit(tiny_model_dir, 2)
    assert len(rec.rows) == 2
    row = rec.rows[-1]
    assert row["train/episode/turns"] == 2 and row["train/episode/finish_max_turns"] == 1.0
    assert row["train/episode/tool_error_rate"] == 1.0  # a random model writes no tool calls
    assert row["train/time/generation_s"] > 0 and row["train/time/environment_s"] > 0 and "train/time/training_s" in row
    assert torch.isfinite(torch.tensor(row["train/loss"])) and row["train/reward/overlong/mean"] <= 0
    for s in rec.samples[-1]:
        assert [t.role for t in s.turns] == ["assistant", "tool", "assistant", "tool"]
        assert [t.trainable for t in s.turns] == [True, False, True, False]
        assert s.turns[1].text.startswith("error: no_tool_call") and s.artifacts["verifier"]["passed"] is False
        assert s.assistant_length <= 12 and s.assistant_length == len(s.turns[0].token_ids + s.turns[2].token_ids)

    _, first = _fit(tiny_model_dir, 1, tmp_path, save=True)
    resumed_module, resumed = _fit(tiny_model_dir, 2, ckpt_path=str(tmp_path / "epoch=0-step=1.ckpt"))
    straight = [[s.prompt_ids + s.response_ids for s in step] for step in rec.samples]
    again = [[s.prompt_ids + s.response_ids for s in step] for step in first.samples + resumed.samples]
    assert straight == again  # the same tokens sampled in every episode of every step
    for (name, p), (_, q) in zip(
        module.policy.named_parameters(), resumed_module.policy.named_parameters(), strict=True
    ):
        torch.testing.assert_close(p, q, msg=name)


def test_episode_datamodule_refuses_what_is_not_an_environment():
    with pytest.raises(TypeError, match="AgentEnv"):
        EpisodeDataModule(dict, ShellTasks())
    with pytest.raises(TypeError, match="contexts"):
        EpisodeDataModule(ToolEnv, object())
