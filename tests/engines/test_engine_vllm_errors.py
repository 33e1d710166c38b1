"""vLLM engine plumbing that needs no vLLM: the factory, request bodies, and clear errors (runs in the main suite)."""

from __future__ import annotations

import importlib.util
import time

import pytest

from propel.engines.engine import Completion, SamplingSpec
from propel.engines.factory import make_engine
from propel.engines.hf import HFEngine
from propel.engines.vllm import repeat_greedy
from propel.engines.vllm_launch import VLLMServer, free_port
from propel.engines.vllm_server import ServerUnavailable, VLLMServerEngine
from propel.errors import ConfigError, PropelError
from propel.records import Prompt

RAW = Prompt(text="Problem: two plus")
CHAT = Prompt(messages=[{"role": "user", "content": "Hi"}])


@pytest.fixture()
def down_engine(tokenizer):
    """An engine pointed at a loopback port where nothing listens."""
    eng = VLLMServerEngine(
        "m", base_url=f"http://127.0.0.1:{free_port()}", tokenizer=tokenizer, retries=3, backoff_s=0.1
    )
    yield eng
    eng.close()


def test_factory_builds_hf_and_rejects_unknown_kinds(tiny_model_dir):
    engine = make_engine("hf", str(tiny_model_dir), max_batch_size=4)
    assert isinstance(engine, HFEngine) and engine.max_batch_size == 4
    with pytest.raises(ConfigError, match="engine kind must be one of"):
        make_engine("vllm-cpu", str(tiny_model_dir))


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_factory_vllm_without_vllm_names_the_setup_script(tiny_model_dir):
    with pytest.raises(PropelError, match="setup_vllm.sh"):
        make_engine("vllm", str(tiny_model_dir))


def test_server_engine_needs_an_address(tokenizer):
    with pytest.raises(ConfigError, match="base_url"):
        VLLMServerEngine("m", tokenizer=tokenizer)


def test_request_body_maps_the_sampling_spec(down_engine, tokenizer):
    body = down_engine.request_body(
        [RAW, CHAT], SamplingSpec(n=4, temperature=0.7, top_k=5, stop=["\n"], logprobs=True)
    )
    assert body["n"] == 4 and body["top_k"] == 5 and body["stop"] == ["\n"] and body["logprobs"] == 0
    assert body["prompt"][1] == tokenizer.apply_chat_template(CHAT.messages, add_generation_prompt=True)["input_ids"]
    assert body["prompt"][0] == tokenizer(RAW.text)["input_ids"] and body["return_token_ids"] is True
    greedy = down_engine.request_body([RAW], SamplingSpec(n=3, temperature=0.0, top_k=5))
    assert greedy["n"] == 1 and greedy["top_k"] == 0 and "logprobs" not in greedy and "stop" not in greedy
    with pytest.raises(ValueError, match="sampling.n"):
        down_engine.request_body([RAW], SamplingSpec(n=0))


def test_repeat_greedy_copies_not_aliases():
    one = Completion(text="a", token_ids=[1, 2], logprobs=[-0.1, -0.2], finish_reason="stop")
    out = repeat_greedy([one], 3)
    assert [c.token_ids for c in out] == [[1, 2]] * 3
    out[1].token_ids.append(9)
    assert one.token_ids == [1, 2]


def test_down_server_fails_with_a_clear_error_after_backoff(down_engine):
    t0 = time.monotonic()
    with pytest.raises(ServerUnavailable, match=r"did not answer /v1/completions after 3 tries.*vllm serve"):
        down_engine.generate([RAW], SamplingSpec(max_new_tokens=4))
    assert 0.3 <= time.monotonic() - t0 < 10  # two back-off sleeps (0.1 + 0.2 s), then a prompt failure
    assert not down_engine.healthy()


def test_launched_server_binds_loopback_only(tiny_model_dir):
    cmd = VLLMServer(str(tiny_model_dir), lora=True, max_lora_rank=8).command()
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--logprobs-mode") + 1] == "processed_logprobs"
    assert "--enable-lora" in cmd and cmd[cmd.index("--max-lora-rank") + 1] == "8"


def test_policy_engine_for_hf_is_the_live_policy(tiny_model):
    from propel.engines.factory import make_policy_engine
    from propel.models import apply_lora

    model, tok = tiny_model
    policy = apply_lora(model)
    engine = make_policy_engine("hf", "unused", policy, tok)
    assert isinstance(engine, HFEngine) and engine.model is policy
    with pytest.raises(ConfigError, match="engine must be one of"):
        make_policy_engine("vllm-cpu", "unused", policy, tok)


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed here")
def test_modules_reject_unknown_engines_and_name_the_setup_for_vllm(tiny_model_dir):
    from propel.domains.math import MathExpressionDomain
    from propel.lit_modules.grpo import GRPOModule
    from propel.lit_modules.labeling import LabelingModule

    with pytest.raises(ConfigError, match="engine must be one of"):
        GRPOModule(model=str(tiny_model_dir), engine="trt")
    with pytest.raises(ConfigError, match="engine must be one of"):
        LabelingModule(MathExpressionDomain(), generator=str(tiny_model_dir), engine="trt")
    module = LabelingModule(MathExpressionDomain(), generator=str(tiny_model_dir), engine="vllm")
    with pytest.raises(PropelError, match="setup_vllm.sh"):
        module._build_engine(str(tiny_model_dir))
