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
    peft_model = apply_lora(model, LoRASpec(r=4, alpha=8))
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


def test_merged_state_dict_matches_peft_merge_and_leaves_the_policy_alone(tiny_model_dir):
    import copy

    from propel.models import load_model
    from propel.models.lora import merged_state_dict

    model, _ = load_model(str(tiny_model_dir))
    policy = apply_lora(model, LoRASpec(r=4, alpha=8)).eval()
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n, p in policy.named_parameters():
            if "lora_B" in n:
                p.copy_(torch.randn(p.shape, generator=gen) * 0.1)
    before = {k: v.clone() for k, v in policy.state_dict().items()}
    merged = merged_state_dict(policy)
    want = copy.deepcopy(policy).merge_and_unload().state_dict()
    assert model.config.tie_word_embeddings
    want.pop("lm_head.weight")  # tied to the input embedding: left out, the loader ties it back
    assert set(merged) == set(want)
    for key, value in want.items():
        torch.testing.assert_close(merged[key], value, rtol=0, atol=1e-6)
    assert all(torch.equal(v, policy.state_dict()[k]) for k, v in before.items())  # nothing merged in place
    fresh, _ = load_model(str(tiny_model_dir))
    fresh.load_state_dict(merged, strict=False)
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        torch.testing.assert_close(fresh(ids).logits, policy(ids).logits, rtol=1e-5, atol=1e-5)
    assert {v.dtype for v in merged_state_dict(policy, dtype=torch.bfloat16).values()} == {torch.bfloat16}
