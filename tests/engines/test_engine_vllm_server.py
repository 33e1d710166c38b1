"""VLLMServerEngine against a real ``vllm serve`` on 127.0.0.1 (LoRA enabled, fp32), including a server restart.

Run in the vllm environment: ``.venv-vllm/bin/python -m pytest -m vllm tests/engines``.
"""

from __future__ import annotations

import importlib.util
import time

import pytest

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vllm is not installed (scripts/setup_vllm.sh -> .venv-vllm)", allow_module_level=True)

from vllm_helpers import PROMPTS, RAW, assert_follows, perturb_lora

from propel.engines.engine import SamplingSpec
from propel.engines.hf import HFEngine
from propel.engines.vllm_launch import VLLMServer
from propel.engines.vllm_server import VLLMServerEngine
from propel.models import apply_lora, load_model

pytestmark = [pytest.mark.vllm, pytest.mark.real_model]

GREEDY = SamplingSpec(n=1, max_new_tokens=24, temperature=0.0, logprobs=True)


@pytest.fixture(scope="module")
def server(bundled_dir):
    srv = VLLMServer(str(bundled_dir), served_name="smollm2", lora=True, dtype="float32")
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def engine(server, tokenizer):
    eng = VLLMServerEngine(
        "smollm2", base_url=server.base_url, lora=True, tokenizer=tokenizer, backoff_s=2.0, retries=8
    )
    yield eng
    eng.close()


def test_server_binds_loopback_only(server):
    cmd = server.command()
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1" and server.base_url.startswith("http://127.0.0.1:")


def test_greedy_chat_and_raw_match_hf(engine, real_model):
    assert_follows(HFEngine(*real_model).generate(PROMPTS, GREEDY), engine.generate(PROMPTS, GREEDY))


def test_n_samples_and_stop(engine):
    out = engine.generate([RAW, RAW], SamplingSpec(n=3, max_new_tokens=30, stop=["\n"], logprobs=True))
    assert [len(g) for g in out] == [3, 3]
    for c in (c for g in out for c in g):
        assert "\n" not in c.text and len(c.logprobs) == len(c.token_ids) <= 30


def test_lora_sync_and_server_restart(engine, server, bundled_dir):
    model, tok = load_model(str(bundled_dir))
    policy = apply_lora(model)
    perturb_lora(policy, seed=3)
    engine.update_weights(policy)
    want = HFEngine(policy, tok).generate(PROMPTS, GREEDY)
    assert_follows(want, engine.generate(PROMPTS, GREEDY))

    server.stop()
    assert not engine.healthy()
    t0 = time.monotonic()
    server.start()  # same port; the new server knows nothing about the adapter
    print(f"server restart took {time.monotonic() - t0:.1f} s")
    assert_follows(want, engine.generate(PROMPTS, GREEDY))  # engine re-registers the adapter

    perturb_lora(policy, seed=4)  # a further sync after the restart still works
    engine.update_weights(policy)
    assert_follows(HFEngine(policy, tok).generate(PROMPTS, GREEDY), engine.generate(PROMPTS, GREEDY))
