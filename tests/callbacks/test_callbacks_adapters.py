"""Adapter folders: peft format, reloadable by ``PeftModel.from_pretrained`` and by ``load_policy`` (merged)."""

from __future__ import annotations

import torch

from propel.callbacks.adapters import save_adapter
from propel.models import LoRASpec, apply_lora, load_model
from propel.models.policy import load_policy, lora_rank_of


def test_saved_adapter_reloads_with_the_same_logits(tiny_model_dir, tmp_path):
    model, tok = load_model(str(tiny_model_dir))
    policy = apply_lora(model, LoRASpec(r=4, alpha=8, dropout=0.0))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(std=0.5)  # B starts at zero: make the adapter change the output
    policy.eval()
    ids = tok(["Problem: Tom has 3 apples."], return_tensors="pt")
    with torch.no_grad():
        want = policy(**ids).logits
        with policy.disable_adapter():
            base_logits = policy(**ids).logits
    assert not torch.allclose(want, base_logits, atol=1e-3)

    folder = save_adapter(policy, tok, tmp_path / "step-3")
    assert (folder / "adapter_config.json").exists() and (folder / "tokenizer_config.json").exists()
    assert not list(tmp_path.glob(".*.tmp"))

    from peft import PeftModel

    fresh, _ = load_model(str(tiny_model_dir))
    reloaded = PeftModel.from_pretrained(fresh, str(folder)).eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(**ids).logits, want)

    merged, _ = load_policy(str(tiny_model_dir), str(folder))
    assert not hasattr(merged, "peft_config")
    with torch.no_grad():
        torch.testing.assert_close(merged(**ids).logits, want, rtol=1e-4, atol=1e-4)

    unmerged, _ = load_policy(str(tiny_model_dir), str(folder), merge=False)  # what the vLLM engines hot-load
    assert lora_rank_of(unmerged) == 4 and lora_rank_of(merged) == 0
    with torch.no_grad():
        torch.testing.assert_close(unmerged(**ids).logits, want)
