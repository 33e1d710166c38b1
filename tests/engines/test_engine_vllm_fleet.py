"""Routing, failover, cool-down and adapter loading of a ``vllm_server`` fleet, against real loopback HTTP servers that
speak the few vLLM endpoints the engine uses (the main suite; the same with two real vLLM servers is in
``test_engine_vllm_server_fleet.py``, stage 2)."""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from propel.engines.engine import SamplingSpec
from propel.engines.vllm_launch import free_port
from propel.engines.vllm_server import ServerUnavailable, VLLMServerEngine
from propel.errors import ConfigError
from propel.fleet import Fleet
from propel.records import Prompt

SAMPLING = SamplingSpec(n=2, max_new_tokens=1, temperature=1.0)


class FakeVLLM:
    """A loopback server on a fixed port answering ``/health``, ``/v1/completions`` (one token per choice, its text
    the server's tag), ``/v1/load_lora_adapter`` and ``/v1/unload_lora_adapter``; a completions request for an
    adapter it does not hold gets 404 as from vLLM. ``stop``/``start`` lose the adapters, as a restart does."""

    def __init__(self, tag: str, delay_s: float = 0.0) -> None:
        self.tag, self.delay_s, self.port = tag, delay_s, free_port()
        self.completions: list[dict] = []
        self.loaded: list[str] = []
        self.adapters: set[str] = set()
        self.httpd: ThreadingHTTPServer | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        fake = self
        self.adapters = set()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, code: int, payload: dict) -> None:
                out = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # a client that timed out
                    self.wfile.write(out)

            def do_GET(self):
                self.reply(200, {}) if self.path == "/health" else self.reply(404, {"error": "no such path"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/v1/load_lora_adapter":
                    fake.adapters.add(body["lora_name"])
                    fake.loaded.append(body["lora_name"])
                    return self.reply(200, {})
                if self.path == "/v1/unload_lora_adapter":
                    fake.adapters.discard(body["lora_name"])
                    return self.reply(200, {})
                if body["model"] != "m" and body["model"] not in fake.adapters:
                    return self.reply(404, {"error": f"model {body['model']} does not exist"})
                time.sleep(fake.delay_s)
                fake.completions.append(body)
                choice = {"text": fake.tag, "token_ids": [7], "finish_reason": "length"}
                n = body["n"] * len(body["prompt"])
                self.reply(200, {"choices": [dict(choice, index=i) for i in range(n)]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self.httpd is not None:
            self.httpd.shutdown()
            self.httpd.server_close()
            self.httpd = None


@pytest.fixture()
def fakes():
    servers = [FakeVLLM("a"), FakeVLLM("b")]
    yield servers
    for s in servers:
        s.stop()


def prompts(k: int) -> list[Prompt]:
    return [Prompt(token_ids=[1, 2, i]) for i in range(k)]


def tags(groups) -> list[str]:
    return [g[0].text for g in groups]


@pytest.fixture()
def lora_policy(tiny_model_dir):
    """A real (tiny) peft policy: what a sync saves and ships."""
    from propel.models import apply_lora, load_model

    return apply_lora(load_model(str(tiny_model_dir))[0])


def test_one_call_is_split_over_the_fleet_in_prompt_order(fakes, tokenizer):
    engine = VLLMServerEngine("m", base_url=[s.url for s in fakes], tokenizer=tokenizer)
    out = engine.generate(prompts(5), SAMPLING)
    assert [len(g) for g in out] == [2] * 5
    assert [len(s.completions) for s in fakes] == [1, 1]  # one request per server
    served = {p[2]: s.tag for s in fakes for p in s.completions[0]["prompt"]}
    assert sorted(served) == [0, 1, 2, 3, 4] and tags(out) == [served[i] for i in range(5)]  # prompt order kept
    assert sorted(len(s.completions[0]["prompt"]) for s in fakes) == [2, 3]  # contiguous chunks
    engine.close()


def test_round_robin_alternates_over_single_prompt_calls(fakes, tokenizer):
    engine = VLLMServerEngine("m", base_url=[s.url for s in fakes], tokenizer=tokenizer)
    got = [tags(engine.generate(prompts(1), SAMPLING))[0] for _ in range(6)]
    assert got == ["a", "b"] * 3
    engine.close()


def test_least_loaded_avoids_a_busy_server(tokenizer):
    slow, fast = FakeVLLM("slow", delay_s=2.0), FakeVLLM("fast")
    try:
        engine = VLLMServerEngine("m", base_url=[slow.url, fast.url], routing="least_loaded", tokenizer=tokenizer)
        first = threading.Thread(target=engine.generate, args=(prompts(1), SAMPLING))
        first.start()  # round-robin turn 0: the slow server, busy for 2 s
        busy = engine.fleet.state(engine.replicas[0])
        deadline = time.monotonic() + 10
        while busy.in_flight == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert busy.in_flight == 1
        got = [tags(engine.generate(prompts(1), SAMPLING))[0] for _ in range(3)]
        first.join()
        assert got == ["fast"] * 3 and len(slow.completions) == 1
        engine.close()
    finally:
        slow.stop()
        fast.stop()


def test_stopped_server_is_taken_out_logged_and_retried_after_the_cooldown(fakes, tokenizer, caplog):
    a, b = fakes
    engine = VLLMServerEngine("m", base_url=[a.url, b.url], tokenizer=tokenizer, cooldown_s=0.5, backoff_s=0.01)
    caplog.set_level(logging.INFO, logger="propel.fleet")
    assert len(engine.generate(prompts(4), SAMPLING)) == 4
    a.stop()  # mid-run
    for _ in range(3):
        out = engine.generate(prompts(4), SAMPLING)
        assert tags(out) == ["b"] * 4  # every request lands on the live server
    assert f"vLLM server {a.url} failed (ConnectionError): taken out, retried in 0.5 s" in caplog.text
    state = engine.fleet.state(engine.replicas[0])
    assert state.failures == 1 and engine.fleet.in_service() == [engine.replicas[1]]

    time.sleep(0.6)  # cool-down over, but the health check fails: still out, no request wasted on it
    engine.generate(prompts(4), SAMPLING)
    assert state.failures == 1 and state.down_since is not None

    a.start()
    time.sleep(0.6)
    before = len(a.completions)
    assert sorted(tags(engine.generate(prompts(4), SAMPLING))) == ["a", "a", "b", "b"]
    assert len(a.completions) == before + 1 and state.down_since is None
    assert f"vLLM server {a.url} is back in service" in caplog.text
    engine.close()


def test_adapter_is_loaded_on_each_server_under_its_versioned_name(fakes, tokenizer, lora_policy):
    a, b = fakes
    engine = VLLMServerEngine(
        "m", base_url=[a.url, b.url], lora=True, tokenizer=tokenizer, cooldown_s=0.3, backoff_s=0.01
    )
    policy = lora_policy
    engine.update_weights(policy)
    assert a.loaded == b.loaded == ["propel-policy-v1"]
    engine.generate(prompts(2), SAMPLING)
    assert {body["model"] for s in fakes for body in s.completions} == {"propel-policy-v1"}

    b.stop()
    engine.update_weights(policy)  # b is out: the sync goes on without it and takes it out
    assert a.loaded == ["propel-policy-v1", "propel-policy-v2"] and a.adapters == {"propel-policy-v2"}
    assert engine.fleet.in_service() == [engine.replicas[0]]
    b.start()  # restarted: holds no adapter
    time.sleep(0.4)
    engine.generate(prompts(2), SAMPLING)
    assert b.loaded[-1] == "propel-policy-v2" and b.completions[-1]["model"] == "propel-policy-v2"

    b.stop()  # a restart the engine did not see: the 404 makes it register the adapter again
    b.start()
    assert b.adapters == set()
    for _ in range(2):
        engine.generate(prompts(1), SAMPLING)
    assert b.adapters == {"propel-policy-v2"} and b.completions[-1]["model"] == "propel-policy-v2"
    engine.close()


def test_a_hung_server_costs_one_timeout_not_a_hang(tokenizer, caplog):
    hung, live = FakeVLLM("hung", delay_s=5.0), FakeVLLM("live")
    try:
        engine = VLLMServerEngine("m", base_url=[hung.url, live.url], tokenizer=tokenizer, timeout_s=0.5)
        t0 = time.monotonic()
        assert tags(engine.generate(prompts(1), SAMPLING)) == ["live"]  # round-robin sent it to the hung one first
        assert time.monotonic() - t0 < 3.0
        assert "failed (ReadTimeout)" in caplog.text
        engine.close()
    finally:
        hung.stop()
        live.stop()


def test_whole_fleet_down_fails_with_one_line_naming_every_server(tokenizer):
    urls = [f"http://127.0.0.1:{free_port()}" for _ in range(2)]
    engine = VLLMServerEngine("m", base_url=urls, tokenizer=tokenizer, retries=3, backoff_s=0.01)
    with pytest.raises(ServerUnavailable, match=r"2 servers .*out \(1 failure\(s\)\).*after 3 tries"):
        engine.generate(prompts(1), SAMPLING)
    engine.close()
    with pytest.raises(ConfigError, match="routing must be one of"):
        VLLMServerEngine("m", base_url=urls, tokenizer=tokenizer, routing="random")


def test_fleet_rotation_least_loaded_and_all_out_fallback():
    fleet = Fleet(["x", "y", "z"], cooldown_s=60.0)
    assert [fleet.pick() for _ in range(4)] == ["x", "y", "z", "x"]
    fleet.failed("y", "boom")
    assert set(fleet.pick() for _ in range(4)) == {"x", "z"}
    fleet.failed("x", "boom")
    fleet.failed("z", "boom")
    assert fleet.pick() == "y"  # all out: the one due back soonest
    fleet.succeeded("y")
    assert fleet.in_service() == ["y"] and fleet.state("y").failures == 1

    busy = Fleet(["p", "q"], routing="least_loaded")
    with busy.hold("p"):
        assert [busy.pick() for _ in range(3)] == ["q"] * 3
    with pytest.raises(ValueError, match="routing"):
        Fleet(["p"], routing="random")
