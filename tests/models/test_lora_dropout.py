"""LoRA dropout: every forward of a training step runs with dropout off, so the PPO ratio is
exactly 1 before an update; a dropout setting could never act. There is none: ``LoRASpec`` has no such field, the
adapters hold no dropout module, and a checkpoint written while it existed still loads."""

from __future__ import annotations

from dataclasses import asdict, fields

import pytest
import torch

from propel.models import LoRASpec, apply_lora
from propel.models.trained_policy import load_policy


def test_lora_spec_has_no_dropout_and_the_adapters_none_either(tiny_model):
    model, _ = tiny_model
    assert "dropout" not in {f.name for f in fields(LoRASpec)}
    with pytest.raises(TypeError, match="dropout"):
        LoRASpec(dropout=0.05)
    policy = apply_lora(model, LoRASpec(r=4, alpha=8))
    dropouts = [m for name, m in policy.named_modules() if name.endswith("lora_dropout.default")]
    assert dropouts and all(isinstance(m, torch.nn.Identity) for m in dropouts)
    policy.train()
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
        torch.testing.assert_close(policy(ids).logits, policy(ids).logits, rtol=0, atol=0)  # train mode: no noise


def test_a_checkpoint_written_with_a_dropout_setting_still_loads(tiny_model_dir, tiny_model, tmp_path):
    model, _ = tiny_model
    policy = apply_lora(model, LoRASpec(r=4, alpha=8))
    state = {f"policy.{k}": v for k, v in policy.state_dict().items() if "lora_" in k}
    spec = {**asdict(LoRASpec(r=4, alpha=8)), "dropout": 0.05}  # what checkpoints held before the field went
    torch.save({"state_dict": state, "lora_spec": spec}, tmp_path / "old.ckpt")
    loaded, _ = load_policy(str(tiny_model_dir), str(tmp_path / "old.ckpt"), merge=False)
    assert loaded.peft_config["default"].r == 4 and loaded.peft_config["default"].lora_dropout == 0.0
