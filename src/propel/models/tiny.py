"""Tiny random-init causal LMs built from a config: the unit-test and toy-pipeline model (seconds to build)."""

from __future__ import annotations

from pathlib import Path


def tiny_causal_lm(tokenizer, *, hidden_size: int = 64, num_layers: int = 2, num_heads: int = 4, seed: int = 0):
    """A Llama-architecture model (same module names as SmolLM2) sized for tests, sharing ``tokenizer``'s vocab."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )
    torch.manual_seed(seed)
    return LlamaForCausalLM(config).eval()


def save_tiny_model(out_dir: str | Path, base: str = "smollm2-135m-instruct", **kwargs) -> Path:
    """Write a tiny model + the base tokenizer as a ``save_pretrained`` folder, loadable by ``load_model``."""
    from propel.models.loading import load_tokenizer

    out_dir = Path(out_dir)
    tokenizer = load_tokenizer(base)
    model = tiny_causal_lm(tokenizer, **kwargs)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
    return out_dir
