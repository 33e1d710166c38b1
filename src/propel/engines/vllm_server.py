"""Rollouts from an OpenAI-compatible vLLM server: one the user started at a base URL, or one propel launches.

Prompts are rendered and tokenized locally (same chat template and tokens as the HF engine) and sent as token ids to
``/v1/completions``, which serves raw and chat prompts alike. LoRA syncs save the adapter to a folder the server can
read and register it through ``/v1/load_lora_adapter`` (the server needs ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``).
Transient failures (server down, restarting, 5xx) are retried with exponential backoff; an adapter the server lost in a
restart is registered again.

A fleet: ``base_url`` may list several servers (or ``launch=True`` with ``replicas=N`` starts N). One ``generate``
call splits its prompts into one request per server, sent concurrently; each request goes to a server picked
round-robin or least-loaded (:class:`propel.fleet.Fleet`). A server whose request fails (connection error, timeout,
5xx) is taken out (a warning names it), the request goes to another one at once, and the server is offered again
after ``cooldown_s`` once its ``/health`` answers. A LoRA sync registers the adapter on every server in service under
one versioned name (``propel-policy-v<k>``); a server that missed it (out, or restarted) gets it before its next
request. Every request and every sync has a timeout (``timeout_s``, ``sync_timeout_s``), so a stuck server fails a
request instead of hanging the trainer (TRL #2923).

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
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

from propel.engines.engine import Completion, Engine, SamplingSpec
from propel.engines.vllm import is_peft, lora_rank, repeat_greedy, save_adapter
from propel.engines.vllm_launch import VLLMServer
from propel.errors import ConfigError, PropelError
from propel.fleet import ROUTINGS, Fleet, Routing
from propel.records import Prompt


def start_hint(model: str) -> str:
    """The ``vllm serve`` command line for a user-started server that propel can train against."""
    from propel.engines.vllm import LOGPROBS_MODE

    return f"vllm serve {model} --host 127.0.0.1 --logprobs-mode {LOGPROBS_MODE}"


class ServerUnavailable(PropelError):
    """The vLLM server did not answer after all retries."""


class Replica:
    """One server of the fleet: its address, its HTTP session, the adapter it holds, and the process if launched."""

    def __init__(self, base_url: str, server: VLLMServer | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.server = server
        self.session = requests.Session()
        self.adapter: str | None = None
        """Name of the adapter registered on this server (None: none, or not known to be)."""

    def __repr__(self) -> str:
        return self.base_url

    def healthy(self, timeout_s: float = 5.0) -> bool:
        """Whether ``/health`` answers 200 now (no retries)."""
        try:
            return self.session.get(f"{self.base_url}/health", timeout=timeout_s).status_code == 200
        except requests.RequestException:
            return False


class VLLMServerEngine(Engine):
    """Rollouts through one or several vLLM servers' completions API.

    Args:
        model: the served base model: its name on the server, and (unless ``tokenizer`` is given) the alias / folder /
            hub id the tokenizer is loaded from. With ``launch=True`` it is also what the server loads.
        base_url: server root, e.g. ``http://127.0.0.1:8000``, or a list of them (a fleet); ignored with
            ``launch=True``.
        launch: start ``vllm serve`` subprocesses bound to 127.0.0.1 (stopped by :meth:`close`).
        replicas: how many servers ``launch=True`` starts (each on its own port, all at once).
        replica_env: with ``launch=True``, environment variables per replica, one mapping each: give each its own
            GPU (``[{CUDA_VISIBLE_DEVICES: "0"}, {CUDA_VISIBLE_DEVICES: "1"}]``) or its own CPU cores
            (``VLLM_CPU_OMP_THREADS_BIND``); without it replicas on one machine share the same devices.
        lora: the server has LoRA enabled (``--enable-lora``); needed for ``update_weights`` with a peft policy.
        max_lora_rank: passed to a launched server.
        tokenizer: a tokenizer to render and encode prompts (default: ``load_tokenizer(model)``).
        adapter_dir: folder for synced adapters; must be readable by every server (default: a local temp folder).
        timeout_s: per-request timeout of a completions request.
        sync_timeout_s: per-request timeout of adapter loading / unloading (a sync never waits longer per server).
        retries: attempts per request (over the whole fleet) before :class:`ServerUnavailable`.
        backoff_s: delay before the next attempt when no server is in service, doubled each time (capped at 30 s).
        routing: ``round_robin`` or ``least_loaded`` (fewest requests in flight) over the servers in service.
        cooldown_s: how long a failed server stays out before its ``/health`` is checked and it is offered again.
        served_name: the model name the server answers to (default: ``model``).
        check_logprobs: probe a user-started server's logprobs mode before the first warped sampling with logprobs
            (see the module docstring); False trusts the server.
        server_kwargs: extra :class:`~propel.engines.vllm_launch.VLLMServer` arguments for a launched server.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | list[str] | None = None,
        launch: bool = False,
        replicas: int = 1,
        replica_env: list[dict[str, str]] | None = None,
        lora: bool = False,
        max_lora_rank: int = 16,
        tokenizer=None,
        adapter_dir: str | None = None,
        timeout_s: float = 600.0,
        sync_timeout_s: float = 120.0,
        retries: int = 6,
        backoff_s: float = 1.0,
        routing: Routing = "round_robin",
        cooldown_s: float = 30.0,
        served_name: str | None = None,
        check_logprobs: bool = True,
        **server_kwargs,
    ) -> None:
        urls = [base_url] if isinstance(base_url, str) else list(base_url or [])
        if not launch and not urls:
            raise ConfigError("vllm_server engine needs base_url (e.g. http://127.0.0.1:8000) or launch=True")
        if retries < 1:
            raise ConfigError(f"retries must be >= 1, got {retries}")
        if launch and replicas < 1:
            raise ConfigError(f"replicas must be >= 1, got {replicas}")
        if replica_env is not None and len(replica_env) != replicas:
            raise ConfigError(f"replica_env needs one mapping per replica: {len(replica_env)} for {replicas}")
        if routing not in ROUTINGS:
            raise ConfigError(f"routing must be one of {ROUTINGS}, got {routing!r}")
        if min(timeout_s, sync_timeout_s) <= 0:
            raise ConfigError(f"timeout_s and sync_timeout_s must be > 0, got {timeout_s}, {sync_timeout_s}")
        from propel.models import load_tokenizer

        self.model, self.served_name = model, served_name or model
        self.tokenizer = tokenizer or load_tokenizer(model)
        self.lora, self.timeout_s, self.retries, self.backoff_s = lora, timeout_s, retries, backoff_s
        self.sync_timeout_s, self.max_lora_rank = sync_timeout_s, max_lora_rank
        self.replicas: list[Replica] = []
        if launch:
            for i in range(replicas):
                server = VLLMServer(
                    model,
                    served_name=self.served_name,
                    lora=lora,
                    max_lora_rank=max_lora_rank,
                    env=replica_env[i] if replica_env else None,
                    **server_kwargs,
                )
                self.replicas.append(Replica(server.base_url, server))
            try:
                with ThreadPoolExecutor(max_workers=replicas, thread_name_prefix="propel-vllm-launch") as pool:
                    list(pool.map(lambda r: r.server.start(), self.replicas))
            except BaseException:
                self.close()
                raise
        else:
            self.replicas = [Replica(url) for url in urls]
        self.fleet: Fleet[Replica] = Fleet(
            self.replicas,
            names=[r.base_url for r in self.replicas],
            routing=routing,
            cooldown_s=cooldown_s,
            health_check=Replica.healthy,
            what="vLLM server",
        )
        self._own_dir = adapter_dir is None
        self.adapter_dir = Path(adapter_dir) if adapter_dir else Path(tempfile.mkdtemp(prefix="propel-vllm-server-"))
        self._adapter: tuple[str, str] | None = None  # (name on the servers, folder)
        self._version = 0
        # a launched server gets --logprobs-mode processed_logprobs; a user-started one is probed once, when it matters
        self.processed_logprobs: bool | None = True if (launch or not check_logprobs) else None

    @property
    def base_url(self) -> str:
        """The first server's root (the only one for a single server)."""
        return self.replicas[0].base_url

    @property
    def server(self) -> VLLMServer | None:
        """The first launched server process (None for user-started servers)."""
        return self.replicas[0].server

    # ---- HTTP with retries over the fleet ----
    def _post_to(
        self, replica: Replica, path: str, body: dict, timeout_s: float
    ) -> tuple[requests.Response | None, str]:
        """One POST; (response, "") if the server answered below 500, else (None, why)."""
        try:
            resp = replica.session.post(f"{replica.base_url}{path}", json=body, timeout=timeout_s)
        except (requests.ConnectionError, requests.Timeout) as err:
            return None, type(err).__name__
        if resp.status_code >= 500:
            return None, f"HTTP {resp.status_code}: {resp.text[:200]}"
        return resp, ""

    def _unavailable(self, path: str, tries: int, last: str) -> ServerUnavailable:
        where = self.base_url if len(self.replicas) == 1 else f"{len(self.replicas)} servers ({self.fleet.summary()})"
        return ServerUnavailable(
            f"vLLM server at {where} did not answer {path} after {tries} tries ({last}): start it "
            f"with `{start_hint(self.model)}` (add --enable-lora for LoRA) or use launch=True"
        )

    def _post(self, path: str, body: dict) -> requests.Response:
        """POST to a server of the fleet, moving to another one on connection errors, timeouts and 5xx (the failed
        one is taken out for ``cooldown_s``); 4xx come back to the caller. A completions request first registers the
        current adapter on a server that does not hold it, and once more after a 404 (a restarted server)."""
        delay, last = self.backoff_s, ""
        for attempt in range(self.retries):
            replica = self.fleet.pick()
            with self.fleet.hold(replica):
                resp, last = self._send(replica, path, body)
            if resp is not None:
                self.fleet.succeeded(replica)
                return resp
            replica.adapter = None  # a server that failed may come back without it
            self.fleet.failed(replica, last)
            if attempt + 1 < self.retries and not self.fleet.in_service():
                time.sleep(delay)
                delay = min(delay * 2, 30.0)
        raise self._unavailable(path, self.retries, last)

    def _send(self, replica: Replica, path: str, body: dict) -> tuple[requests.Response | None, str]:
        if path != "/v1/completions" or self._adapter is None:
            return self._post_to(replica, path, body, self.timeout_s)
        for fresh in (False, True):
            if replica.adapter != self._adapter[0]:
                resp, why = self._register_on(replica, *self._adapter)
                if resp is None:
                    return None, why
            resp, why = self._post_to(replica, path, body, self.timeout_s)
            if resp is None or resp.status_code != 404 or fresh:
                return resp, why
            replica.adapter = None  # server restarted and forgot the adapter
        raise AssertionError("unreachable")

    def healthy(self) -> bool:
        """Whether every server answers ``/health`` now (no retries)."""
        return all(r.healthy() for r in self.replicas)

    def context_length(self) -> int | None:
        """The server's ``max_model_len`` (from ``/v1/models``), asked once; None when it does not say."""
        if not hasattr(self, "_context_length"):
            self._context_length = None
            for replica in self.replicas:
                try:
                    models = replica.session.get(f"{replica.base_url}/v1/models", timeout=10).json().get("data", [])
                except (requests.RequestException, ValueError):
                    continue
                lengths = [m.get("max_model_len") for m in models if m.get("max_model_len")]
                self._context_length = int(lengths[0]) if lengths else None
                break
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
        """``sampling.n`` completions per prompt: one request per server of the fleet, sent concurrently."""
        if not prompts:
            return []
        self.check_logprobs(sampling)
        parts = min(len(self.replicas), len(prompts))
        size = -(-len(prompts) // parts)
        chunks = [list(prompts[i : i + size]) for i in range(0, len(prompts), size)]
        if len(chunks) == 1:
            return self._generate_chunk(chunks[0], sampling)
        with ThreadPoolExecutor(max_workers=len(chunks), thread_name_prefix="propel-vllm-fleet") as pool:
            done = list(pool.map(lambda chunk: self._generate_chunk(chunk, sampling), chunks))
        return [group for part in done for group in part]

    def _generate_chunk(self, prompts: list[Prompt], sampling: SamplingSpec) -> list[list[Completion]]:
        body = self.request_body(prompts, sampling)
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
        """Save a peft policy's adapter and register it on every server in service under a new versioned name; later
        calls use it. A server that fails to load it is taken out and gets it before its next request."""
        if not is_peft(policy):
            raise ConfigError(
                "the vllm_server engine syncs LoRA adapters only: wrap the policy with apply_lora, or restart the "
                "server on a saved checkpoint for full fine-tuning"
            )
        if not self.lora:
            raise ConfigError("update_weights needs a LoRA-enabled server: build the engine with lora=True")
        if self.server is not None and lora_rank(policy) > self.max_lora_rank:
            raise ConfigError(f"policy LoRA rank {lora_rank(policy)} > server max_lora_rank {self.max_lora_rank}")
        self._version += 1
        path = save_adapter(policy, self.adapter_dir, self._version)
        name = f"propel-policy-v{self._version}"
        old, self._adapter = self._adapter, (name, str(path))
        targets = self.fleet.in_service() or [self.fleet.pick()]
        with ThreadPoolExecutor(max_workers=len(targets), thread_name_prefix="propel-vllm-sync") as pool:
            outcomes = list(pool.map(lambda r: self._register_on(r, name, str(path)), targets))
        for replica, (resp, why) in zip(targets, outcomes, strict=True):
            if resp is None:
                self.fleet.failed(replica, f"adapter {name} not loaded: {why}")
        if all(resp is None for resp, _ in outcomes):
            raise self._unavailable("/v1/load_lora_adapter", 1, outcomes[-1][1])
        if old is not None:
            for replica in self.fleet.in_service():  # best effort: a 4xx just means it's gone
                self._post_to(replica, "/v1/unload_lora_adapter", {"lora_name": old[0]}, self.sync_timeout_s)
            shutil.rmtree(old[1], ignore_errors=True)

    def _register_on(self, replica: Replica, name: str, path: str) -> tuple[requests.Response | None, str]:
        """Load adapter ``name`` from ``path`` on one server; (None, why) when it did not answer in time. A server that
        answers but refuses raises: that is a setup error, not a transient one."""
        resp, why = self._post_to(
            replica, "/v1/load_lora_adapter", {"lora_name": name, "lora_path": path}, self.sync_timeout_s
        )
        if resp is None:
            return None, why
        if resp.status_code == 404 and "load_lora_adapter" in resp.text or resp.status_code == 405:
            raise ConfigError(
                f"server {replica.base_url} has no /v1/load_lora_adapter: start it with "
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True"
            )
        if resp.status_code != 200 and "already been loaded" not in resp.text:
            raise PropelError(
                f"vLLM server {replica.base_url} refused adapter {name} from {path}: HTTP {resp.status_code}: "
                f"{resp.text[:300]}"
            )
        replica.adapter = name
        return resp, ""

    def close(self) -> None:
        """Stop launched servers and remove synced adapters."""
        for replica in self.replicas:
            replica.session.close()
            if replica.server is not None:
                replica.server.stop()
        if getattr(self, "_own_dir", False):
            shutil.rmtree(self.adapter_dir, ignore_errors=True)
