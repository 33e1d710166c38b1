"""Multi-turn GRPO with the real bundled model: agent episodes (ToolEnv on ShellTasks, a bubblewrapped workspace per
episode), sampled by the HF engine (main suite) or in-process vLLM (``-m vllm``), trained for two steps, written to
Parquet by ``TrajectoryWriter`` and read back."""

from __future__ import annotations

import importlib.util
from functools import partial

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback

from propel.callbacks.trajectories import TrajectoryWriter
from propel.datamodules.agent_episodes import EpisodeDataModule
from propel.envs import ToolEnv
from propel.lit_modules.grpo import GRPOModule
from propel.losses.policy_gradient import LossSpec
from propel.models.lora import LoRASpec
from propel.rewards import EnvironmentReward, OverlongPenalty
from propel.rollouts.conversation import with_tool_block
from propel.rollouts.trajectories import read_trajectories
from propel.tasks.shell import ShellTasks

ENGINES = [
    pytest.param("hf", marks=pytest.mark.real_model),
    pytest.param(
        "vllm",
        marks=[
            pytest.mark.vllm,
            pytest.mark.real_model,
            pytest.mark.skipif(
                importlib.util.find_spec("vllm") is None, reason="vllm is not installed (runs in .venv-vllm, stage 2)"
            ),
        ],
    ),
]


class Rows(Callback):
    def __init__(self):
        self.rows = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.rows.append({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")})


@pytest.mark.parametrize("engine", ENGINES)
def test_multi_turn_grpo_on_the_bundled_model(engine, bundled_dir, tmp_path):
    pl.seed_everything(0)
    module = GRPOModule(
        model=str(bundled_dir),
        rewards=[EnvironmentReward(), OverlongPenalty(max_length=64, cache=32)],
        lora=LoRASpec(r=8, alpha=16),
        group_size=2,
        max_new_tokens=40,
        temperature=0.7,
        lr=1e-4,
        loss=LossSpec("dapo", beta=0.04),
        engine=engine,
        engine_kwargs={"dtype": "float32", "max_model_len": 1536} if engine == "vllm" else None,
    )
    data = EpisodeDataModule(partial(ToolEnv, max_turns=2), ShellTasks(["create_file"]), contexts_per_step=1)
    rows = Rows()
    trainer = pl.Trainer(
        max_steps=2,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=[rows, TrajectoryWriter(str(tmp_path), every_n_steps=1)],
    )
    trainer.fit(module, datamodule=data)
    assert len(rows.rows) == 2 and all(torch.isfinite(torch.tensor(r["train/loss"])) for r in rows.rows)
    assert 1 <= rows.rows[-1]["train/episode/turns"] <= 2 and rows.rows[-1]["train/episode/infra_failures"] == 0
    written = sorted(tmp_path.glob("step-*.parquet"))
    assert [p.name for p in written] == ["step-000000.parquet", "step-000001.parquet"]
    samples = read_trajectories(written[-1])
    assert samples == module.rollout_state.samples
    tok = module.tokenizer
    for s in samples:
        assert s.turns[0].role == "assistant" and all(t.trainable == (t.role == "assistant") for t in s.turns)
        assert all(t.logprobs is not None and len(t.logprobs) == len(t.token_ids) for t in s.turns if t.trainable)
        # the ids decode to the chat template's rendering of the conversation (text-exact; the sampled tokens are
        # kept as sampled, so they need not be the tokenizer's own split of that text)
        opening = with_tool_block(
            [{"role": "system", "content": ToolEnv().system_prompt}, *s.context.prompt.messages], ToolEnv.tools
        )
        messages = opening + [{"role": t.role, "content": t.text} for t in s.turns]
        ends_on_observation = not s.turns[-1].trainable  # then the next assistant header is already appended
        rendered = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=ends_on_observation)
        decoded = tok.decode(s.prompt_ids + s.response_ids, skip_special_tokens=False)
        assert rendered.startswith(decoded) and rendered[len(decoded) :] in ("", "<|im_end|>\n", "\n")
