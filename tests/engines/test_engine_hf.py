"""HFEngine on a tiny random model: rendering, n samples, stop strings, greedy, and sampling-distribution logprobs."""

from __future__ import annotations

import pytest
import torch
from peft.tuners.lora import LoraLayer

from propel.engines.engine import SamplingSpec
from propel.engines.hf import HFEngine
from propel.losses.logprobs import token_logprobs
from propel.models import apply_lora
from propel.records import Prompt

CHAT = Prompt(messages=[{"role": "user", "content": "Write a sum."}])
RAW = Prompt(text="Problem: two plus")


def _rescore(engine: HFEngine, prompt: Prompt, token_ids: list[int], **warp) -> torch.Tensor:
    """Teacher-forced logprobs of the completion under the same warping (what the trainer computes)."""
    prefix = engine.encode_prompt(prompt)
    ids = torch.tensor([prefix + token_ids])
    with torch.no_grad():
        logits = engine.model(input_ids=ids).logits[:, len(prefix) - 1 : -1]
    return token_logprobs(logits, ids[:, len(prefix) :], **warp)[0][0]


def test_render(tiny_model):
    model, tok = tiny_model
    engine = HFEngine(model, tok)
    assert engine.render(RAW) == RAW.text
    want = tok.apply_chat_template(CHAT.messages, tokenize=False, add_generation_prompt=True)
    assert engine.render(CHAT) == want and want.endswith("assistant\n")


def test_n_samples_per_prompt_in_order_and_lengths(tiny_model):
    model, tok = tiny_model
    torch.manual_seed(0)
    out = HFEngine(model, tok, max_batch_size=4).generate([RAW, CHAT, RAW], SamplingSpec(n=3, max_new_tokens=7))
    assert [len(g) for g in out] == [3, 3, 3]
    for group in out:
        for c in group:
            assert 1 <= len(c.token_ids) <= 7 and c.logprobs is None
            assert c.finish_reason == ("length" if len(c.token_ids) == 7 else "stop")
    assert len({tuple(c.token_ids) for c in out[0]}) > 1  # sampling, not copies


def test_greedy_batched_equals_single_and_is_deterministic(tiny_model):
    model, tok = tiny_model
    engine = HFEngine(model, tok)
    spec = SamplingSpec(n=2, max_new_tokens=10, temperature=0.0, logprobs=True)
    batched = engine.generate([RAW, CHAT], spec)
    assert batched[0][0].token_ids == batched[0][1].token_ids
    single = engine.generate([CHAT], spec)[0][0]
    assert single.token_ids == batched[1][0].token_ids
    torch.testing.assert_close(torch.tensor(single.logprobs), torch.tensor(batched[1][0].logprobs), atol=1e-4, rtol=0)


@pytest.mark.parametrize("warp", [{}, {"temperature": 0.7}, {"temperature": 1.3, "top_k": 20, "top_p": 0.8}])
def test_logprobs_are_under_the_sampling_distribution(tiny_model, warp):
    model, tok = tiny_model
    engine = HFEngine(model, tok)
    torch.manual_seed(1)
    out = engine.generate([RAW, CHAT], SamplingSpec(n=2, max_new_tokens=12, logprobs=True, **warp))
    for prompt, group in zip([RAW, CHAT], out, strict=True):
        for c in group:
            assert len(c.logprobs) == len(c.token_ids)
            want = _rescore(engine, prompt, c.token_ids, **warp)
            torch.testing.assert_close(torch.tensor(c.logprobs), want, atol=2e-4, rtol=0)
    if "top_k" in warp:  # warped: differs from the raw-distribution logprob
        c = out[0][0]
        raw = _rescore(engine, RAW, c.token_ids)
        assert not torch.allclose(torch.tensor(c.logprobs), raw, atol=1e-3)


def test_stop_strings_cut_text_and_token_ids(tiny_model):
    model, tok = tiny_model
    engine = HFEngine(model, tok)
    torch.manual_seed(2)
    out = engine.generate([RAW], SamplingSpec(n=6, max_new_tokens=30, stop=["e"], logprobs=True))[0]
    stopped = [c for c in out if "e" in tok.decode(c.token_ids)]
    assert stopped, "the tiny model should emit an 'e' within 30 tokens"
    for c in stopped:
        assert "e" not in c.text and c.finish_reason == "stop"
        full = tok.decode(c.token_ids, skip_special_tokens=True)
        assert full.startswith(c.text + "e")  # ids end with the token that completes the stop string
        assert "e" not in tok.decode(c.token_ids[:-1], skip_special_tokens=True)
        assert len(c.logprobs) == len(c.token_ids)


def test_peft_policy_is_used_live(tiny_model):
    model, tok = tiny_model
    policy = apply_lora(model)
    engine = HFEngine(policy, tok)
    spec = SamplingSpec(n=1, max_new_tokens=8, temperature=0.0)
    before = engine.generate([RAW], spec)[0][0].token_ids
    policy.train()
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 1.0)
    engine.update_weights(policy)  # no-op: the engine holds the live model
    after = engine.generate([RAW], spec)[0][0].token_ids
    assert before != after
    assert policy.training  # the engine restores the train/eval mode it found
    with policy.disable_adapter():
        assert engine.generate([RAW], spec)[0][0].token_ids == before


def test_bad_sampling(tiny_model):
    model, tok = tiny_model
    with pytest.raises(ValueError, match="sampling.n"):
        HFEngine(model, tok).generate([RAW], SamplingSpec(n=0))


def test_merged_lora_generation_matches_unmerged_and_restores_weights(tiny_model):
    model, tok = tiny_model
    policy = apply_lora(model)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.5)
    weights = {n: p.detach().clone() for n, p in policy.named_parameters()}
    spec = SamplingSpec(n=2, max_new_tokens=8, temperature=0.0, logprobs=True)
    merged, plain = HFEngine(policy, tok), HFEngine(policy, tok, merge_lora=False)
    assert merged.merge_lora and not plain.merge_lora
    a, b = merged.generate([RAW], spec)[0], plain.generate([RAW], spec)[0]
    assert [c.token_ids for c in a] == [c.token_ids for c in b]
    torch.testing.assert_close(torch.tensor(a[0].logprobs), torch.tensor(b[0].logprobs), rtol=1e-4, atol=1e-4)
    for name, p in policy.named_parameters():  # the base weights (the KL reference) come back bit for bit
        assert torch.equal(p, weights[name]), name
    assert not any(getattr(m, "merged", False) for m in policy.modules())
    lora_layers = [m for m in policy.modules() if isinstance(m, LoraLayer)]
    assert lora_layers and not any(m.disable_adapters for m in lora_layers)  # the adapter path is back on


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_shared_prefill_gives_the_same_samples(tiny_model, temperature):
    """One prefill per prompt, its KV cache copied to the n rows: same tokens and logprobs as n separate prefills,
    for prompts of different lengths (left padding) and chunks split across calls."""
    model, tok = tiny_model
    prompts = [RAW, CHAT, Prompt(text="Problem: a much longer prompt with many more tokens in it, seven"), RAW]
    spec = SamplingSpec(n=3, max_new_tokens=9, temperature=temperature, logprobs=True)
    outs = []
    for share in (True, False):
        torch.manual_seed(5)
        outs.append(HFEngine(model, tok, max_batch_size=6, share_prefill=share).generate(prompts, spec))
    shared, plain = outs
    assert [[c.token_ids for c in g] for g in shared] == [[c.token_ids for c in g] for g in plain]
    for a, b in zip(shared, plain, strict=True):
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), rtol=1e-4, atol=1e-4)
    if temperature:
        assert len({tuple(c.token_ids) for c in shared[0]}) > 1  # the n rows of one prompt are sampled apart


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_a_static_cache_gives_the_same_samples_as_the_dynamic_one(tiny_model, temperature):
    """``cache_implementation="static"`` (what ``generate`` compiles around on a GPU) samples the same tokens with the
    same logprobs as the dynamic cache and the shared prefill, and really decodes with a static cache."""
    from transformers import StaticCache

    model, tok = tiny_model
    prompts = [RAW, CHAT, Prompt(text="Problem: a much longer prompt with many more tokens in it, seven"), RAW]
    spec = SamplingSpec(n=3, max_new_tokens=9, temperature=temperature, logprobs=True)
    caches = []
    original = model.generate

    def recording(*args, **kwargs):
        out = original(*args, return_dict_in_generate=True, **kwargs)
        caches.append(type(out.past_key_values))
        return out.sequences

    outs = []
    for kind in (None, "static"):
        torch.manual_seed(5)
        engine = HFEngine(model, tok, max_batch_size=6, cache_implementation=kind)
        assert engine.share_prefill is (kind is None)
        model.generate = recording
        try:
            outs.append(engine.generate(prompts, spec))
        finally:
            del model.generate
    dynamic, static = outs
    assert caches[-1] is StaticCache and caches[0] is not StaticCache, caches
    assert [[c.token_ids for c in g] for g in static] == [[c.token_ids for c in g] for g in dynamic]
    for a, b in zip(static, dynamic, strict=True):
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(torch.tensor(x.logprobs), torch.tensor(y.logprobs), rtol=1e-4, atol=1e-4)


def _peaked_with_processors(model, tok):
    """The tiny model with peaked logits (its final norm scaled) and a generation config that sets every kind of
    processor transformers would otherwise apply: penalties, n-gram bans, min-p, suppressed tokens."""
    with torch.no_grad():
        model.model.norm.weight.mul_(20.0)  # near-uniform logits hide the processors; peaked ones show them in nats
    gc = model.generation_config
    gc.repetition_penalty, gc.no_repeat_ngram_size, gc.min_p = 3.0, 2, 0.2
    gc.suppress_tokens = [tok.eos_token_id, tok.convert_tokens_to_ids(".")]
    return model


@pytest.mark.parametrize("warp", [{}, {"temperature": 0.0}, {"temperature": 0.7, "top_k": 20, "top_p": 0.9}])
def test_the_model_generation_config_never_changes_what_is_sampled(tiny_model, warp):
    """transformers fills every GenerationConfig field the engine leaves unset from ``model.generation_config``
    (Qwen2.5-Instruct ships repetition_penalty 1.05): the engine must sample, and record logprobs, under exactly the
    distribution the trainer scores with ``token_logprobs``."""
    model, tok = tiny_model
    engine = HFEngine(_peaked_with_processors(model, tok), tok)
    torch.manual_seed(3)
    out = engine.generate([RAW, CHAT], SamplingSpec(n=2, max_new_tokens=24, logprobs=True, **warp))
    worst = 0.0
    for prompt, group in zip([RAW, CHAT], out, strict=True):
        for c in group:
            want = _rescore(engine, prompt, c.token_ids, **warp)  # temperature 0 scores as 1, as the trainer does
            worst = max(worst, float((torch.tensor(c.logprobs) - want).abs().max()))
    assert worst <= 1e-5, worst


def test_sampling_sets_no_length_field_that_transformers_warns_about(tiny_model, caplog):
    """Setting ``min_length`` beside ``min_new_tokens`` made transformers warn on every ``generate`` call."""
    model, tok = tiny_model
    HFEngine(model, tok).generate([RAW], SamplingSpec(n=2, max_new_tokens=4))
    assert "seem to have been set" not in caplog.text


def test_a_minimum_length_in_the_model_generation_config_is_not_applied(tiny_model):
    """A checkpoint's ``min_length``/``min_new_tokens`` would mask EOS, which the trainer does not: with EOS made all
    but certain (an lm_head bias), every completion ends at its first token."""
    model, tok = tiny_model
    head = model.lm_head
    biased = torch.nn.Linear(head.in_features, head.out_features, bias=True)
    with torch.no_grad():
        biased.weight.copy_(head.weight)
        biased.bias.zero_()
        biased.bias[tok.eos_token_id] = 50.0
    model.lm_head = biased
    model.generation_config.min_length, model.generation_config.min_new_tokens = 60, 5
    out = HFEngine(model, tok).generate([RAW, CHAT], SamplingSpec(n=3, max_new_tokens=8, logprobs=True))
    assert all(c.token_ids == [tok.eos_token_id] and c.finish_reason == "stop" for g in out for c in g), out
    assert all(abs(c.logprobs[0]) < 1e-3 for g in out for c in g)


@pytest.mark.parametrize(
    ("field", "value"),
    [("bad_words_ids", [[5]]), ("forced_eos_token_id", 2), ("sequence_bias", {(5,): 3.0}), ("top_h", 0.5)],
)
def test_a_generation_config_field_with_no_neutral_value_is_refused_by_name(tiny_model, field, value):
    model, tok = tiny_model
    setattr(model.generation_config, field, value)
    with pytest.raises(ValueError, match=field):
        HFEngine(model, tok).generate([RAW], SamplingSpec(n=1, max_new_tokens=4))


def test_the_eos_set_is_the_tokenizers_and_the_generation_configs_and_generation_stops_on_each(tiny_model):
    """One EOS set, from the engine: ``eos_ids`` is what ``generate`` stops on (and what an episode strips)."""
    from propel.engines.scripted import ScriptedEngine

    model, tok = tiny_model
    other = tok.convert_tokens_to_ids("<|endoftext|>")
    model.generation_config.eos_token_id = [tok.eos_token_id, other]
    engine = HFEngine(model, tok)
    assert engine.eos_ids() == {tok.eos_token_id, other}

    def certain(module, args, logits):  # <|endoftext|> becomes the next token: generation must stop right on it
        return logits.index_add(-1, torch.tensor([other]), torch.full((*logits.shape[:-1], 1), 100.0))

    hook = model.lm_head.register_forward_hook(certain)
    try:
        c = engine.generate([RAW], SamplingSpec(n=1, max_new_tokens=8, temperature=0.0))[0][0]
    finally:
        hook.remove()
    assert c.token_ids == [other] and c.finish_reason == "stop"
    assert ScriptedEngine(tok, str).eos_ids() == {tok.eos_token_id}  # the bundled folder's generation_config: [2]
