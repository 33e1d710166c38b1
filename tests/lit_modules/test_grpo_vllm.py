"""GRPOModule with the in-process vLLM engine on the real bundled model: the engine follows the trained adapter.

Run in the vllm environment: ``make test-vllm`` (``.venv-vllm/bin/python -m pytest -m vllm``).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vllm is not installed (scripts/setup_vllm.sh -> .venv-vllm)", allow_module_level=True)

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback

sys.path.insert(0, str(Path(__file__).parents[1] / "engines"))
from test_grpo_module import LetterDomain, Record, share_of_a  # noqa: E402
from vllm_helpers import PROMPTS, assert_follows  # noqa: E402

from propel.datamodules.contexts import ContextDataModule  # noqa: E402
from propel.engines.engine import SamplingSpec  # noqa: E402
from propel.engines.hf import HFEngine  # noqa: E402
from propel.lit_modules.grpo import GRPOModule  # noqa: E402
from propel.losses.policy_gradient import LossSpec  # noqa: E402
from propel.models.lora import LoRASpec  # noqa: E402
from propel.rewards import FunctionReward  # noqa: E402

pytestmark = [pytest.mark.vllm, pytest.mark.real_model]

GREEDY = SamplingSpec(n=1, max_new_tokens=24, temperature=0.0, logprobs=True)


class FollowsPolicy(Callback):
    """Greedy vLLM output before training, and vLLM vs HF-on-the-live-policy after the last optimizer step."""

    def on_train_start(self, trainer, module):
        self.engine_before = module.engine.generate(PROMPTS, GREEDY)
        self.synced_versions = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.synced_versions.append(module.engine._version)

    def on_train_end(self, trainer, module):
        module.sync_engine()  # what the next step would do first
        module.policy.eval()
        self.engine_after = module.engine.generate(PROMPTS, GREEDY)
        self.hf_after = HFEngine(module.policy, module.tokenizer).generate(PROMPTS, GREEDY)
        self.engine_steps = module.engine._version


def fit_with_vllm(bundled_dir, max_steps: int, callbacks, **kwargs) -> GRPOModule:
    """GRPO on the bundled model with the in-process vLLM engine, ``max_steps`` steps of 2 contexts x G=4."""
    pl.seed_everything(0)
    module = GRPOModule(
        model=str(bundled_dir),
        rewards=[FunctionReward("a_share", share_of_a)],
        lora=LoRASpec(r=8, alpha=16),
        group_size=4,
        max_new_tokens=8,
        lr=2e-2,
        loss=LossSpec(beta=0.04),
        engine="vllm",
        engine_kwargs={"dtype": "float32"},
        **kwargs,
    )
    trainer = pl.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        callbacks=list(callbacks),
    )
    trainer.fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2))
    return module


def test_grpo_with_vllm_engine_follows_the_trained_adapter(bundled_dir):
    check, rec = FollowsPolicy(), Record()
    module = fit_with_vllm(bundled_dir, 3, [check, rec])

    assert len(rec.rows) == 3 and all(torch.isfinite(torch.tensor(r["train/loss"])) for r in rec.rows)
    # adapter v1 loaded at start; each later step syncs the previous step's update first (v2 before step 2, v3 before
    # step 3; batch_start sees the version before that sync), and the final sync ships step 3's update (v4)
    assert check.synced_versions == [1, 1, 2]
    assert check.engine_steps == 4
    before = [g[0].token_ids for g in check.engine_before]
    after = [g[0].token_ids for g in check.engine_after]
    assert after != before, "the trained adapter should change vLLM's greedy output"
    assert_follows(check.hf_after, check.engine_after)
    assert module.engine is None  # closed at the end of fit (worker processes and KV cache released)


class Staleness(Callback):
    """Per step: the optimizer step, the step of the weights that sampled its rollouts, and the importance weights."""

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        m = trainer.callback_metrics
        self.rows = getattr(self, "rows", [])
        state = module.rollout_state
        self.rows.append((state.step, state.policy_version, float(m["train/is_weight_mean"]), float(m["train/loss"])))


def test_async_rollouts_with_vllm_engine(bundled_dir):
    """vLLM samples batch k+1 on the worker thread while batch k trains; the adapter is synced
    between batches, each step is one optimizer step stale, and the importance weights are applied."""
    rec = Staleness()
    module = fit_with_vllm(bundled_dir, 4, [rec], async_rollouts=True, max_staleness=1)
    steps, versions, weights, losses = zip(*rec.rows, strict=True)
    assert list(steps) == [0, 1, 2, 3]
    assert [s - v for s, v in zip(steps, versions, strict=True)] == [0, 1, 1, 1]
    assert all(torch.isfinite(torch.tensor(losses)))
    # A step behind, the trainer's policy and vLLM's (older) adapter differ: the weights move away from 1.
    assert any(abs(w - 1.0) > 1e-3 for w in weights[1:]), weights
    assert (
        module.engine is None and module.async_rollouts._prefetcher is None
    )  # worker and engine closed at the end of fit
