"""A fleet of two real ``vllm serve`` processes (bundled model, LoRA, fp32): one is stopped mid-run, the run finishes
on the other, the failure is logged, and the stopped server is taken back (adapter re-registered) after it returns.

Run in the vllm environment: ``.venv-vllm/bin/python -m pytest -m vllm tests/engines``.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import time

import pytest

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vllm is not installed (scripts/setup_vllm.sh -> .venv-vllm)", allow_module_level=True)

import psutil
from vllm_helpers import PROMPTS, assert_follows, perturb_lora

from propel.engines.engine import SamplingSpec
from propel.engines.hf import HFEngine
from propel.engines.vllm_server import VLLMServerEngine
from propel.models import apply_lora, load_model

pytestmark = [pytest.mark.vllm, pytest.mark.real_model]

GREEDY = SamplingSpec(n=1, max_new_tokens=24, temperature=0.0, logprobs=True)
COOLDOWN_S = 3.0


def fleet_rss_gib(engine: VLLMServerEngine) -> float:
    """Resident memory of every launched server and its worker processes, GiB."""
    total = 0
    for replica in engine.replicas:
        proc = psutil.Process(replica.server.proc.pid)
        total += sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)])
    return total / 2**30


def core_each(n: int) -> list[dict[str, str]] | None:
    """One CPU core per server (two servers' OpenMP threads on the same cores slow both ~10x here); None if too few."""
    cores = sorted(os.sched_getaffinity(0))
    return [{"VLLM_CPU_OMP_THREADS_BIND": str(c)} for c in cores[:n]] if len(cores) >= n else None


@pytest.mark.timeout(1200)  # two server starts and one restart on 2 cores
def test_two_servers_one_stopped_mid_run(bundled_dir, tokenizer, caplog):
    t0 = time.monotonic()
    engine = VLLMServerEngine(
        str(bundled_dir),
        served_name="smollm2",
        launch=True,
        replicas=2,
        replica_env=core_each(2),
        lora=True,
        dtype="float32",
        tokenizer=tokenizer,
        cooldown_s=COOLDOWN_S,
        backoff_s=1.0,
        timeout_s=120.0,
    )
    try:
        print(f"two servers up in {time.monotonic() - t0:.1f} s, {fleet_rss_gib(engine):.2f} GiB resident")
        model, tok = load_model(str(bundled_dir))
        policy = apply_lora(model)
        perturb_lora(policy, seed=3)
        engine.update_weights(policy)
        assert [r.adapter for r in engine.replicas] == ["propel-policy-v1"] * 2  # loaded on each, versioned name
        prompts = PROMPTS * 2  # two requests per call, one per server
        want = HFEngine(policy, tok).generate(prompts, GREEDY)
        assert_follows(want, engine.generate(prompts, GREEDY))

        down = engine.replicas[0]
        down.server.stop()  # mid-run
        caplog.set_level(logging.INFO, logger="propel.fleet")
        for _ in range(2):
            assert_follows(want, engine.generate(prompts, GREEDY))  # the run goes on, on the other server
        assert engine.fleet.state(down).failures == 1 and engine.fleet.in_service() == [engine.replicas[1]]
        assert f"vLLM server {down.base_url} failed" in caplog.text

        perturb_lora(policy, seed=4)  # a sync while one server is out
        engine.update_weights(policy)
        want = HFEngine(policy, tok).generate(prompts, GREEDY)
        assert_follows(want, engine.generate(prompts, GREEDY))

        down.server.start()  # back on the same port, without any adapter
        time.sleep(COOLDOWN_S)
        assert_follows(want, engine.generate(prompts, GREEDY))
        assert engine.fleet.in_service() == engine.replicas and down.adapter == "propel-policy-v2"
        assert f"vLLM server {down.base_url} is back in service" in caplog.text
    finally:
        engine.close()
