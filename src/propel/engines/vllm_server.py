"""Rollouts from an OpenAI-compatible vLLM server: one the user started at a base URL, or one propel launches.

Prompts are rendered and tokenized locally (same chat template and tokens as the HF engine) and sent as token ids to
``/v1/completions``, which serves raw and chat prompts alike. LoRA syncs save the adapter to a folder the server can
read and register it through ``/v1/load_lora_adapter`` (the server needs ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``).
Transient failures (server down, restarting, 5xx) are retried with exponential backoff; an adapter the server lost in a
restart is registered again.

Logprobs must be the server's ``processed_logprobs`` (under the temperature / top-k / top-p actually sampled from, as
the trainer computes them); a server started without ``--logprobs-mode processed_logprobs`` returns the raw model
distribution's, which biases the importance weights at T != 1, top_p < 1 or top_k > 0. A launched server gets the
flag; for a user-started one the mode is probed once (a one-token request with ``top_k=1``: processed logprobs of
the only token left are 0, raw ones are not) and sampling that warps refuses a raw server with a one-line error.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import requests

from propel.engines.base import Completion, Engine, Prompt, SamplingSpec
from propel.engines.vllm import is_peft, lora_rank, repeat_greedy, save_adapter
from propel.engines.vllm_launch import VLLMServer
from propel.errors import ConfigError, PropelError


def start_hint(model: str) -> str:
    """The ``vllm serve`` command line for a user-started server that propel can train against."""
    from propel.engines.vllm import LOGPROBS_MODE

    return f"vllm serve {model} --host 127.0.0.1 --logprobs-mode {LOGPROBS_MODE}"


class ServerUnavailable(PropelError):
    """The vLLM server did not answer after all retries."""


class VLLMServerEngine(Engine):
    """Rollouts through a vLLM server's completions API.

    Args:
        model: the served base model: its name on the server, and (unless ``tokenizer`` is given) the alias / folder /
            hub id the tokenizer is loaded from. With ``launch=True`` it is also what the server loads.
        base_url: server root, e.g. ``http://127.0.0.1:8000``; ignored with ``launch=True``.
        launch: start ``vllm serve`` as a subprocess bound to 127.0.0.1 (stopped by :meth:`close`).
        lora: the server has LoRA enabled (``--enable-lora``); needed for ``update_weights`` with a peft policy.
        max_lora_rank: passed to a launched server.
        tokenizer: a tokenizer to render and encode prompts (default: ``load_tokenizer(model)``).
        adapter_dir: folder for synced adapters; must be readable by the server (default: a local temp folder).
        timeout_s: per-request timeout.
        retries: attempts per request before :class:`ServerUnavailable`.
        backoff_s: first retry delay, doubled each attempt (capped at 30 s).
        served_name: the model name the server answers to (default: ``model``).
        check_logprobs: probe a user-started server's logprobs mode before the first warped sampling with logprobs
            (see the module docstring); False trusts the server.
        server_kwargs: extra :class:`~propel.engines.vllm_launch.VLLMServer` arguments for a launched server.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        launch: bool = False,
        lora: bool = False,
        max_lora_rank: int = 16,
        tokenizer=None,
        adapter_dir: str | None = None,
        timeout_s: float = 600.0,
        retries: int = 6,
        backoff_s: float = 1.0,
        served_name: str | None = None,
        check_logprobs: bool = True,
        **server_kwargs,
    ) -> None:
        if not launch and not base_url:
            raise ConfigError("vllm_server engine needs base_url (e.g. http://127.0.0.1:8000) or launch=True")
        if retries < 1:
            raise ConfigError(f"retries must be >= 1, got {retries}")
        from propel.models import load_tokenizer

        self.model, self.served_name = model, served_name or model
        self.tokenizer = tokenizer or load_tokenizer(model)
        self.lora, self.timeout_s, self.retries, self.backoff_s = lora, timeout_s, retries, backoff_s
        self.server: VLLMServer | None = None
        if launch:
            self.server = VLLMServer(
                model, served_name=self.served_name, lora=lora, max_lora_rank=max_lora_rank, **server_kwargs
            )
            self.server.start()
            base_url = self.server.base_url
        self.base_url = base_url.rstrip("/")
        self._own_dir = adapter_dir is None
        self.adapter_dir = Path(adapter_dir) if adapter_dir else Path(tempfile.mkdtemp(prefix="propel-vllm-server-"))
        self._adapter: tuple[str, str] | None = None  # (name on the server, folder)
        self._version = 0
        self._session = requests.Session()
        # a launched server gets --logprobs-mode processed_logprobs; a user-started one is probed once, when it matters
        self.processed_logprobs: bool | None = True if (launch or not check_logprobs) else None

    # ---- HTTP with retries ----
    def _post(self, path: str, body: dict) -> requests.Response:
        """POST with retries on connection errors, timeouts and 5xx; 4xx come back to the caller."""
        url, delay, last = f"{self.base_url}{path}", self.backoff_s, None
        for attempt in range(self.retries):
            try:
                resp = self._session.post(url, json=body, timeout=self.timeout_s)
                if resp.status_code < 500:
                    return resp
                last = f"HTTP {resp.status_code}: {resp.text[:200]}"
            except (requests.ConnectionError, requests.Timeout) as err:
                last = f"{type(err).__name__}"
            if attempt + 1 < self.retries:
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
        raise ServerUnavailable(
            f"vLLM server at {self.base_url} did not answer {path} after {self.retries} tries ({last}): start it "
            f"with `{start_hint(self.model)}` (add --enable-lora for LoRA) or use launch=True"
        )

    def healthy(self) -> bool:
        """Whether the server answers ``/health`` now (no retries)."""
        try:
            return self._session.get(f"{self.base_url}/health", timeout=5).status_code == 200
        except requests.RequestException:
            return False

    def context_length(self) -> int | None:
        """The server's ``max_model_len`` (from ``/v1/models``), asked once; None when it does not say."""
        if not hasattr(self, "_context_length"):
            self._context_length = None
            try:
                models = self._session.get(f"{self.base_url}/v1/models", timeout=10).json().get("data", [])
                lengths = [m.get("max_model_len") for m in models if m.get("max_model_len")]
                self._context_length = int(lengths[0]) if lengths else None
            except (requests.RequestException, ValueError):
                pass
        return self._context_length

    # ---- prompts ----
    def request_body(self, prompts: Sequence[Prompt], sampling: SamplingSpec) -> dict:
        """The ``/v1/completions`` body (vLLM extensions: ``top_k``, ``return_token_ids``)."""
        if sampling.n < 1 or sampling.max_new_tokens < 1:
            raise ValueError(
                f"sampling.n and sampling.max_new_tokens must be >= 1, got {sampling.n}, {sampling.max_new_tokens}"
            )
        greedy = sampling.temperature == 0
        body = {
            "model": self._adapter[0] if self._adapter else self.served_name,
            "prompt": [self.encode_prompt(p) for p in prompts],
            "n": 1 if greedy else sampling.n,  # vLLM refuses n > 1 when greedy; generate() repeats the answer
            "max_tokens": sampling.max_new_tokens,
            "temperature": sampling.temperature,
            "top_p": 1.0 if greedy else sampling.top_p,
            "top_k": 0 if greedy or not sampling.top_k else sampling.top_k,
            "return_token_ids": True,
            # explicit neutral values: a server may take other defaults from the model's generation_config.json
            "min_p": 0.0,
            "repetition_penalty": 1.0,
            "presence_penalty": 0.0,
            "frequency_penalty": 0.0,
        }
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.logprobs:
            body["logprobs"] = 0
        return body

    def logprobs_mode_is_processed(self) -> bool:
        """Whether the server returns processed logprobs: asked once with a one-token ``top_k=1`` request (the only
        token left has processed logprob 0; a raw logprob is below 0 unless the model is certain of it)."""
        if self.processed_logprobs is None:
            body = {
                "model": self.served_name,
                "prompt": [self.encode_prompt(Prompt(text="Once upon a time,"))],
                "max_tokens": 1,
                "temperature": 1.0,
                "top_k": 1,
                "logprobs": 0,
            }
            resp = self._post("/v1/completions", body)
            if resp.status_code != 200:
                raise PropelError(f"vLLM server refused the logprobs-mode probe: HTTP {resp.status_code}: {resp.text}")
            logprob = float(resp.json()["choices"][0]["logprobs"]["token_logprobs"][0])
            self.processed_logprobs = abs(logprob) < 1e-3
        return self.processed_logprobs

    def check_logprobs(self, sampling: SamplingSpec) -> None:
        """Refuse a raw-logprobs server when the logprobs would be used under a warped distribution."""
        warped = sampling.temperature not in (0, 1) or sampling.top_p < 1 or sampling.top_k > 0
        if sampling.logprobs and warped and not self.logprobs_mode_is_processed():
            raise ConfigError(
                f"the vLLM server at {self.base_url} returns raw logprobs (the unwarped model distribution), but "
                f"sampling uses temperature={sampling.temperature}, top_p={sampling.top_p}, top_k={sampling.top_k}: "
                f"the importance weights would be biased; restart it with `{start_hint(self.model)}`"
            )

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingSpec) -> list[list[Completion]]:
        if not prompts:
            return []
        self.check_logprobs(sampling)
        body = self.request_body(prompts, sampling)
        resp = self._post("/v1/completions", body)
        if resp.status_code == 404 and self._adapter is not None:  # server restarted and forgot the adapter
            self._register_adapter(*self._adapter)
            resp = self._post("/v1/completions", body)
        if resp.status_code != 200:
            raise PropelError(
                f"vLLM server rejected the completions request: HTTP {resp.status_code}: {resp.text[:300]}"
            )
        choices = sorted(resp.json()["choices"], key=lambda c: c["index"])
        n = body["n"]
        if len(choices) != len(prompts) * n:
            raise PropelError(f"vLLM server returned {len(choices)} choices for {len(prompts)} x n={n}")
        flat = [self._completion(c, sampling.logprobs) for c in choices]
        return [repeat_greedy(flat[i * n : (i + 1) * n], sampling.n) for i in range(len(prompts))]

    @staticmethod
    def _completion(choice: dict, want_logprobs: bool) -> Completion:
        ids = list(choice.get("token_ids") or [])
        logprobs = None
        if want_logprobs:
            logprobs = [float(x) for x in choice["logprobs"]["token_logprobs"]]
        finish = "stop" if choice.get("finish_reason") == "stop" else "length"
        return Completion(text=choice["text"], token_ids=ids, logprobs=logprobs, finish_reason=finish)

    # ---- weight sync ----
    def update_weights(self, policy) -> None:
        """Save a peft policy's adapter and register it on the server under a new name; later calls use it."""
        if not is_peft(policy):
            raise ConfigError(
                "the vllm_server engine syncs LoRA adapters only: wrap the policy with apply_lora, or restart the "
                "server on a saved checkpoint for full fine-tuning"
            )
        if not self.lora:
            raise ConfigError("update_weights needs a LoRA-enabled server: build the engine with lora=True")
        if self.server is not None and lora_rank(policy) > self.server.max_lora_rank:
            raise ConfigError(
                f"policy LoRA rank {lora_rank(policy)} > server max_lora_rank {self.server.max_lora_rank}"
            )
        self._version += 1
        path = save_adapter(policy, self.adapter_dir, self._version)
        name = f"propel-policy-v{self._version}"
        self._register_adapter(name, str(path))
        old, self._adapter = self._adapter, (name, str(path))
        if old is not None:
            self._post("/v1/unload_lora_adapter", {"lora_name": old[0]})  # best effort: a 4xx just means it's gone
            shutil.rmtree(old[1], ignore_errors=True)

    def _register_adapter(self, name: str, path: str) -> None:
        resp = self._post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": path})
        if resp.status_code == 404 and "load_lora_adapter" in resp.text or resp.status_code == 405:
            raise ConfigError(
                "server has no /v1/load_lora_adapter: start it with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
            )
        if resp.status_code != 200 and "already been loaded" not in resp.text:
            raise PropelError(
                f"vLLM server refused adapter {name} from {path}: HTTP {resp.status_code}: {resp.text[:300]}"
            )

    def close(self) -> None:
        """Stop a launched server and remove synced adapters."""
        self._session.close()
        if self.server is not None:
            self.server.stop()
        if self._own_dir:
            shutil.rmtree(self.adapter_dir, ignore_errors=True)
