"""The GRPO trainer refuses Lightning's plain FSDP over a bf16 LoRA policy where it builds the policy, with an error
that names the strategy that works (propel.models.fsdp), instead of FSDP's "Must flatten tensors with uniform dtype"
mid-setup (the H200's first FSDP run, docs/gpu.md)."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
from lightning.pytorch.strategies import FSDPStrategy

from propel.lit_modules.grpo import GRPOModule
from propel.models.fsdp import LoRAFSDPStrategy


def _configured(model_dir, strategy, dtype):
    module = GRPOModule(model=str(model_dir), dtype=dtype)
    trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False, max_steps=1)
    # Lightning builds no FSDP trainer without a GPU: the strategy goes in after, where trainer.strategy reads it
    trainer._accelerator_connector.strategy = strategy
    assert trainer.strategy is strategy
    module.trainer = trainer
    module.configure_model()
    return module


def test_plain_fsdp_on_a_bf16_policy_is_refused_with_the_working_strategy_named(tiny_model_dir):
    with pytest.raises(ValueError, match=r"LoRAFSDPStrategy.*configs/grpo/fsdp\.yaml"):
        _configured(tiny_model_dir, FSDPStrategy(), "bfloat16")


def test_the_lora_strategy_and_a_one_dtype_policy_pass(tiny_model_dir):
    assert _configured(tiny_model_dir, LoRAFSDPStrategy(), "bfloat16").policy is not None
    assert _configured(tiny_model_dir, FSDPStrategy(), "float32").policy is not None
