"""A user-started vLLM server without ``--logprobs-mode processed_logprobs`` is detected (against a fake server)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from propel.engines.engine import SamplingSpec
from propel.engines.vllm_launch import free_port
from propel.engines.vllm_server import ServerUnavailable, VLLMServerEngine
from propel.errors import ConfigError
from propel.records import Prompt


def fake_server(probe_logprob: float):
    """A loopback server answering ``/v1/completions`` like vLLM: the ``top_k=1`` probe gets ``probe_logprob``,
    other requests one token with logprob -0.5 per choice."""
    requests_seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests_seen.append(body)
            logprob = probe_logprob if body.get("top_k") == 1 else -0.5
            n = body.get("n", 1) * len(body["prompt"])
            choice = {"text": "x", "token_ids": [87], "finish_reason": "length",
                      "logprobs": {"token_logprobs": [logprob]}}  # fmt: skip
            out = json.dumps({"choices": [dict(choice, index=i) for i in range(n)]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, requests_seen


@pytest.mark.parametrize("processed", [True, False])
def test_raw_logprobs_server_is_refused_when_sampling_warps(tokenizer, processed):
    """A server that returns raw logprobs is refused once sampling warps them (temperature, top-p: the trainer
    needs processed logprobs); it is probed once, and only when logprobs are wanted."""
    server, seen = fake_server(0.0 if processed else -1.7)
    engine = VLLMServerEngine("m", base_url=f"http://127.0.0.1:{server.server_port}", tokenizer=tokenizer)
    try:
        plain = SamplingSpec(n=2, temperature=1.0, max_new_tokens=1, logprobs=True)
        assert len(engine.generate([Prompt(text="a")], plain)[0]) == 2  # T=1, no top-k/p: raw == processed
        assert not seen[0].get("top_k") and engine.processed_logprobs is None  # nothing probed yet
        warped = SamplingSpec(n=2, temperature=0.7, top_p=0.9, max_new_tokens=1, logprobs=True)
        if processed:
            assert engine.generate([Prompt(text="a")], warped)[0][0].logprobs == [-0.5]
        else:
            with pytest.raises(ConfigError, match="raw logprobs.*--logprobs-mode processed_logprobs"):
                engine.generate([Prompt(text="a")], warped)
        assert engine.processed_logprobs is processed
        probes = [r for r in seen if r.get("top_k") == 1]
        assert len(probes) == 1 and probes[0]["max_tokens"] == 1  # asked once
        engine.generate([Prompt(text="a")], SamplingSpec(n=1, temperature=0.7))  # no logprobs wanted: no check
    finally:
        engine.close()
        server.shutdown()


def test_startup_hints_name_the_logprobs_flag(tokenizer):
    engine = VLLMServerEngine(
        "m", base_url=f"http://127.0.0.1:{free_port()}", tokenizer=tokenizer, retries=1, backoff_s=0.01
    )
    with pytest.raises(ServerUnavailable, match="--logprobs-mode processed_logprobs"):
        engine.generate([Prompt(text="a")], SamplingSpec(n=1, max_new_tokens=1))
    trusting = VLLMServerEngine("m", base_url="http://127.0.0.1:1", tokenizer=tokenizer, check_logprobs=False)
    assert trusting.processed_logprobs is True
    engine.close()
    trusting.close()
