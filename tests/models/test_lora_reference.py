"""LoRA wrapping and frozen references."""

from __future__ import annotations

import torch

from propel.models import ALL_PROJECTIONS, LoRASpec, apply_lora, freeze, frozen_copy, reference_forward


def test_lora_trains_only_adapters_on_all_projections(tiny_model):
    model, _ = tiny_model
    peft_model = apply_lora(model, LoRASpec(r=4, alpha=8))
    trainable = [n for n, p in peft_model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    adapted = {n.split(".")[-4] for n in trainable if n.endswith("lora_A.default.weight")}
    assert adapted == set(ALL_PROJECTIONS)


def test_reference_forward_disables_adapters_without_a_copy(tiny_model):
    model, _ = tiny_model
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        base_logits = model(ids).logits.clone()
    peft_model = apply_lora(model, LoRASpec(r=4, alpha=8, dropout=0.0))
    peft_model.eval()
    with torch.no_grad():
        for n, p in peft_model.named_parameters():
            if "lora_B" in n:
                p.add_(0.5)  # B starts at zero: make the adapter change the output
        policy_logits = peft_model(ids).logits
        with reference_forward(peft_model):
            ref_logits = peft_model(ids).logits
    assert not torch.allclose(policy_logits, base_logits)
    torch.testing.assert_close(ref_logits, base_logits)


def test_frozen_copy_is_independent_and_gradient_free(tiny_model):
    model, _ = tiny_model
    ref = frozen_copy(model)
    assert all(not p.requires_grad for p in ref.parameters())
    assert all(p.requires_grad for p in model.parameters())
    with torch.no_grad():
        next(model.parameters()).add_(1.0)
    assert not torch.equal(next(model.parameters()), next(ref.parameters()))
    assert freeze(model) is model and not model.training
