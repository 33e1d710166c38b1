"""The GPU memory estimate: a hand-computed tiny case, and parameter / LoRA counts checked against real models."""

from __future__ import annotations

import pytest

from propel.models.memory import KNOWN, ArchSpec, estimate_grpo_memory, kv_cache_bytes, lora_params

# hidden 8, 2 layers, 2 query heads of width 4, 1 kv head, MLP 16, vocab 32, tied embeddings
TINY = ArchSpec(hidden=8, layers=2, heads=2, kv_heads=1, intermediate=16, vocab=32, tied=True)


def test_tiny_case_by_hand():
    # embed 32*8=256; per layer q 64 + k 32 + v 32 + o 64 + gate 128 + up 128 + down 128 + 2 norms 16 = 592
    assert TINY.params() == 256 + 2 * 592 + 8 == 1448
    # r=2: q 2*(8+8)=32, k 2*(8+4)=24, v 24, o 32, gate 2*(8+16)=48, up 48, down 48 -> 256 per layer
    assert lora_params(TINY, 2) == 512
    assert kv_cache_bytes(TINY, tokens=10) == 2 * 2 * 1 * 4 * 2 * 10 == 320
    est = estimate_grpo_memory(TINY, lora_r=2, micro_batch=2, seq_len=4, rollout_tokens=10, overhead_gib=0)
    # weights 2896, LoRA state 512*16, activations 8 tokens*34*8*2 layers, logits 8*32*8, vLLM weights, KV
    assert (est.weights, est.trainable_state, est.activations, est.logits) == (2896, 8192, 4352, 2048)
    assert (est.engine_weights, est.kv_cache, est.total) == (2896, 320, 2896 + 8192 + 4352 + 2048 + 2896 + 320)
    ckpt = estimate_grpo_memory(TINY, lora_r=2, micro_batch=2, seq_len=4, gradient_checkpointing=True)
    assert ckpt.activations == 8 * 2 * 8 * 2 + 8 * 34 * 8
    full = estimate_grpo_memory(TINY, lora_r=None, engine="vllm_server", engine_on_this_gpu=False)
    assert full.trainable_state == 1448 * 16 and full.engine_weights == full.kv_cache == 0


def test_counts_match_a_real_model_built_from_the_config():
    from transformers import LlamaConfig, LlamaForCausalLM

    from propel.models import LoRASpec, apply_lora

    config = LlamaConfig(
        hidden_size=8, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, intermediate_size=16,
        vocab_size=32, tie_word_embeddings=True,
    )  # fmt: skip
    arch = ArchSpec.from_config(config)
    assert (arch.dim, arch.params(), arch.tied) == (TINY.dim, TINY.params(), True)
    model = LlamaForCausalLM(config)
    assert sum(p.numel() for p in model.parameters()) == arch.params()
    policy = apply_lora(model, LoRASpec(r=2))
    assert sum(p.numel() for p in policy.parameters() if p.requires_grad) == lora_params(arch, 2)


@pytest.mark.parametrize(
    ("name", "published"),
    [("Qwen/Qwen2.5-3B-Instruct", 3.09e9), ("Qwen/Qwen2.5-7B-Instruct", 7.62e9), ("Qwen/Qwen3-4B", 4.02e9)],
)
def test_known_architectures_match_published_sizes(name, published):
    assert KNOWN[name].params() == pytest.approx(published, rel=0.005)


def test_bundled_model_count_matches_its_weights(bundled_dir):
    import json

    arch = ArchSpec.from_config(json.loads((bundled_dir / "config.json").read_text()))
    known = KNOWN["smollm2-135m-instruct"]
    assert (arch.dim, arch.kv_heads, arch.params()) == (known.dim, known.kv_heads, known.params())
