"""VLLMEngine (in-process vLLM, LoRA enabled) against the HF engine on the real bundled model, both in fp32.

Run in the vllm environment: ``.venv-vllm/bin/python -m pytest -m vllm tests/engines``.
"""

from __future__ import annotations

import importlib.util

import pytest
import torch

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vllm is not installed (scripts/setup_vllm.sh -> .venv-vllm)", allow_module_level=True)

from vllm_helpers import CHAT, PROMPTS, RAW, assert_follows, common_prefix, perturb_lora

from propel.engines.engine import SamplingSpec
from propel.engines.hf import HFEngine
from propel.losses.logprobs import token_logprobs
from propel.models import apply_lora, load_model

pytestmark = [pytest.mark.vllm, pytest.mark.real_model]

GREEDY = SamplingSpec(n=1, max_new_tokens=24, temperature=0.0, logprobs=True)


@pytest.fixture(scope="module")
def engine(bundled_dir):
    from propel.engines.vllm import VLLMEngine

    eng = VLLMEngine(str(bundled_dir), lora=True, max_lora_rank=16, dtype="float32")
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def policy(bundled_dir):
    """A private fp32 copy of the bundled model wrapped in LoRA (the shared ``real_model`` stays untouched)."""
    model, tok = load_model(str(bundled_dir))
    return apply_lora(model), tok


def _rescore(hf: HFEngine, prompt, token_ids: list[int], **warp) -> torch.Tensor:
    """Teacher-forced HF logprobs of a completion under the given warping (what the trainer computes)."""
    prefix = hf.encode_prompt(prompt)
    ids = torch.tensor([prefix + token_ids])
    with torch.no_grad():
        logits = hf.model(input_ids=ids).logits[:, len(prefix) - 1 : -1]
    return token_logprobs(logits, ids[:, len(prefix) :], **warp)[0][0]


def test_render_and_tokens_match_hf(engine, real_model):
    hf = HFEngine(*real_model)
    for p in PROMPTS:
        assert engine.render(p) == hf.render(p)
        assert engine.encode_prompt(p) == hf.encode_prompt(p)


def test_greedy_text_and_logprobs_match_hf(engine, real_model):
    hf_out = HFEngine(*real_model).generate(PROMPTS, GREEDY)
    v_out = engine.generate(PROMPTS, GREEDY)
    for h, v in zip(hf_out, v_out, strict=True):
        h, v = h[0], v[0]
        # fp32 in both; kernels differ, so a near-tie could flip a late token: require a long shared prefix.
        shared = common_prefix(h.token_ids, v.token_ids)
        assert shared >= min(16, len(h.token_ids)), (h.text, v.text)
        if shared == len(h.token_ids) == len(v.token_ids):
            assert v.text == h.text and v.finish_reason == h.finish_reason
        torch.testing.assert_close(
            torch.tensor(v.logprobs[:shared]), torch.tensor(h.logprobs[:shared]), atol=2e-3, rtol=0
        )
    assert "Paris" in v_out[0][0].text


@pytest.mark.parametrize("warp", [{"temperature": 0.7}, {"temperature": 1.2, "top_k": 20, "top_p": 0.8}])
def test_sampled_logprobs_are_under_the_sampling_distribution(engine, real_model, warp):
    hf = HFEngine(*real_model)
    out = engine.generate(PROMPTS, SamplingSpec(n=3, max_new_tokens=16, logprobs=True, **warp))
    for prompt, group in zip(PROMPTS, out, strict=True):
        assert len(group) == 3
        for c in group:
            assert len(c.logprobs) == len(c.token_ids) > 0
            want = _rescore(hf, prompt, c.token_ids, **warp)
            torch.testing.assert_close(torch.tensor(c.logprobs), want, atol=5e-3, rtol=0)
    raw = _rescore(hf, RAW, out[1][0].token_ids)  # the unwarped distribution gives different numbers
    assert not torch.allclose(torch.tensor(out[1][0].logprobs), raw, atol=1e-2)


def test_n_samples_stop_strings_and_finish_reasons(engine):
    torch.manual_seed(0)
    out = engine.generate([RAW, CHAT], SamplingSpec(n=4, max_new_tokens=40, stop=["\n", "."], logprobs=True))
    assert [len(g) for g in out] == [4, 4]
    assert len({tuple(c.token_ids) for c in out[1]}) > 1  # sampled, not copies
    tok = engine.tokenizer
    for group in out:
        for c in group:
            assert "\n" not in c.text and "." not in c.text
            assert len(c.logprobs) == len(c.token_ids) <= 40
            if c.finish_reason == "length":
                assert len(c.token_ids) == 40
            else:  # stopped by EOS or a stop string: the text is a prefix of the decoded tokens
                assert tok.decode(c.token_ids, skip_special_tokens=True).startswith(c.text)
    assert any(c.finish_reason == "stop" for g in out for c in g)


def test_lora_sync_follows_the_updated_adapter(engine, policy):
    model, tok = policy
    hf = HFEngine(model, tok)
    base = engine.generate(PROMPTS, GREEDY)
    for step, seed in enumerate((1, 2), start=1):
        perturb_lora(model, seed)
        engine.update_weights(model)
        assert engine._lora_request.lora_int_id == step
        want = hf.generate(PROMPTS, GREEDY)
        got = engine.generate(PROMPTS, GREEDY)
        assert_follows(want, got)
        assert [g[0].token_ids for g in got] != [b[0].token_ids for b in base]  # the adapter changed the output


def test_lora_rank_too_large_is_a_config_error(engine, bundled_dir):
    from propel.errors import ConfigError
    from propel.models import LoRASpec

    model, _ = load_model(str(bundled_dir))
    with pytest.raises(ConfigError, match="max_lora_rank"):
        engine.update_weights(apply_lora(model, LoRASpec(r=32)))
