"""Fixtures the trainer tests share."""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(scope="session")
def peaked_model_dir(tmp_path_factory, tokenizer):
    """A tiny random Llama whose (tied) embeddings are scaled x8: a peaked, learnable next-token distribution."""
    from propel.models.tiny import tiny_causal_lm

    model = tiny_causal_lm(tokenizer)
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(8.0)
    out = tmp_path_factory.mktemp("peaked") / "model"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out
