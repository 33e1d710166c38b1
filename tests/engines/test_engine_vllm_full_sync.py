"""VLLMEngine without LoRA: ``update_weights`` with a fully fine-tuned model copies its weights into the workers.

Run in the vllm environment: ``.venv-vllm/bin/python -m pytest -m vllm tests/engines``.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vllm is not installed (scripts/setup_vllm.sh -> .venv-vllm)", allow_module_level=True)

from vllm_helpers import PROMPTS, assert_follows

from propel.engines.engine import SamplingSpec
from propel.engines.hf import HFEngine
from propel.models import load_model

pytestmark = [pytest.mark.vllm, pytest.mark.real_model]

GREEDY = SamplingSpec(n=1, max_new_tokens=24, temperature=0.0, logprobs=True)


def test_full_weight_sync_follows_the_updated_model(bundled_dir):
    from propel.engines.vllm import VLLMEngine

    model, tok = load_model(str(bundled_dir))
    engine = VLLMEngine(str(bundled_dir), dtype="float32")
    try:
        before = engine.generate(PROMPTS, GREEDY)
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():  # an "update" to every untied weight matrix (tied embeddings: see VLLMEngine._load_full)
            for name, p in model.named_parameters():
                if p.ndim == 2 and "embed_tokens" not in name:
                    p.add_(torch.randn(p.shape, generator=gen) * p.std() * 0.1)
        with pytest.warns(UserWarning, match="tied embeddings"):
            engine.update_weights(model)
        want = HFEngine(model, tok).generate(PROMPTS, GREEDY)
        got = engine.generate(PROMPTS, GREEDY)
        assert_follows(want, got)
        assert [g[0].token_ids for g in got] != [b[0].token_ids for b in before]
    finally:
        engine.close()


def test_merged_lora_sync_follows_the_policy(bundled_dir):
    """``lora_sync="merged"``: the trainer merges the LoRA deltas and vLLM reloads full weights (no LoRA kernels)."""
    from vllm_helpers import perturb_lora

    from propel.engines.vllm import VLLMEngine
    from propel.models import apply_lora

    model, tok = load_model(str(bundled_dir))
    policy = apply_lora(model).eval()
    engine = VLLMEngine(str(bundled_dir), lora_sync="merged", dtype="float32")
    try:
        assert engine._lora_request is None and not engine.lora
        before = engine.generate(PROMPTS, GREEDY)
        for seed in (1, 2):
            perturb_lora(policy, seed)
            engine.update_weights(policy)
            want = HFEngine(policy, tok).generate(PROMPTS, GREEDY)
            got = engine.generate(PROMPTS, GREEDY)
            assert_follows(want, got)
            assert [g[0].token_ids for g in got] != [b[0].token_ids for b in before]
        assert len(list(engine._tmp.glob("merged-v*"))) == 1  # the previous sync's folder is removed
    finally:
        engine.close()
