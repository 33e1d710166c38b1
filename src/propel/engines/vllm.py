"""Rollouts with vLLM in-process (``vllm.LLM``); LoRA adapters are hot-loaded at each weight sync.

vLLM runs its engine core in worker processes: a script that builds a :class:`VLLMEngine` must guard its entry point
with ``if __name__ == "__main__":``. Needs the optional vllm environment (``scripts/setup_vllm.sh`` -> ``.venv-vllm``).

Logprobs are requested as ``processed_logprobs``: log p(sampled token) under the distribution actually sampled from
(temperature, top-k, top-p applied), the same semantics as :class:`~propel.engines.hf.HFEngine`. vLLM's default
(``raw_logprobs``) would be the unwarped model distribution.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import warnings
from collections.abc import Sequence
from pathlib import Path

from propel.engines.engine import Completion, Engine, SamplingSpec
from propel.errors import ConfigError, PropelError
from propel.records import Prompt

LOGPROBS_MODE = "processed_logprobs"


def import_vllm():
    """``import vllm`` with a one-line fix when it is missing."""
    try:
        import vllm
    except ImportError as err:
        raise PropelError(
            f"vllm is not importable ({err}): run `bash scripts/setup_vllm.sh` and use `.venv-vllm/bin/python`"
        ) from err
    return vllm


def cpu_defaults(env=None) -> None:
    """CPU-backend settings in ``env`` (default ``os.environ``) unless the user set them; ignored on GPUs.

    A 2 GiB KV cache, and on machines with at most 4 cores no core reserved for the frontend: vLLM's default
    reserves one, which on 2 cores halves the compute (measured here, SmolLM2-135M fp32, 16 prompts x 8 x 128
    tokens: 192 tok/s with the reserve, 305 tok/s without).
    """
    env = os.environ if env is None else env
    env.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    if (os.cpu_count() or 1) <= 4:
        env.setdefault("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")


def default_dtype(dtype: str | None) -> str:
    """``dtype`` as given, else bf16 on GPUs and fp32 on CPUs (fp32 measured faster for SmolLM2-135M on this
    AVX-512 CPU: 305 vs 260 tok/s, and its logprobs match the fp32 trainer's for the importance correction)."""
    if dtype is not None:
        return dtype
    import torch

    return "bfloat16" if torch.cuda.is_available() else "float32"


def is_peft(policy) -> bool:
    """Whether ``policy`` is a peft model (its adapter is what a sync ships)."""
    return hasattr(policy, "peft_config") and hasattr(policy, "save_pretrained")


def lora_rank(policy) -> int:
    """Largest LoRA rank among the policy's adapters."""
    return max(int(getattr(cfg, "r", 0)) for cfg in policy.peft_config.values())


def save_adapter(policy, root: Path, version: int) -> Path:
    """Write the active adapter (weights + config only) to ``root/v<version>``; vLLM reads it from there."""
    out = root / f"v{version}"
    policy.save_pretrained(str(out))
    return out


def repeat_greedy(group: list[Completion], n: int) -> list[Completion]:
    """``n`` independent copies of a greedy answer (greedy decoding is asked for once, it is deterministic)."""
    if len(group) >= n:
        return group
    return group + [
        dataclasses.replace(
            group[0],
            token_ids=list(group[0].token_ids),
            logprobs=None if group[0].logprobs is None else list(group[0].logprobs),
        )
        for _ in range(n - len(group))
    ]


def completion_from_output(out, want_logprobs: bool) -> Completion:
    """A :class:`Completion` from one vLLM ``CompletionOutput`` (EOS / stop-string tokens stay in ``token_ids``)."""
    ids = list(out.token_ids)
    logprobs = None
    if want_logprobs:
        if out.logprobs is None:
            raise PropelError("vLLM returned no logprobs although they were requested")
        logprobs = [float(step[tid].logprob) for tid, step in zip(ids, out.logprobs, strict=True)]
    finish = "stop" if out.finish_reason == "stop" else "length"
    return Completion(text=out.text, token_ids=ids, logprobs=logprobs, finish_reason=finish)


class VLLMEngine(Engine):
    """Rollouts with an in-process ``vllm.LLM``.

    Args:
        model_path: bundled alias, local ``save_pretrained`` folder or hub id of the base model.
        lora: enable LoRA so ``update_weights`` can hot-load a peft policy's adapter.
        lora_sync: how a peft policy reaches vLLM: ``adapter`` (hot-load the adapter; needs ``lora=True``) or
            ``merged`` (merge the deltas on the trainer side and reload full weights: no LoRA kernels at generation
            time, measured 3x faster generation on vLLM CPU for SmolLM2-135M; costs one weight reload per sync).
        max_lora_rank: largest adapter rank vLLM reserves room for.
        dtype: weights dtype; None: bf16 on GPUs, fp32 on CPUs (``default_dtype``).
        max_model_len: prompt + completion tokens per sequence.
        enforce_eager: skip graph capture (needed on CPU; faster startup).
        seed: global sampling seed (a per-request seed is not supported on the CPU backend).
        llm_kwargs: anything else for ``vllm.LLM`` (e.g. ``gpu_memory_utilization``, ``tensor_parallel_size``).
    """

    def __init__(
        self,
        model_path: str,
        *,
        lora: bool = False,
        lora_sync: str = "adapter",
        max_lora_rank: int = 16,
        dtype: str | None = None,
        max_model_len: int = 1024,
        enforce_eager: bool = True,
        seed: int = 0,
        **llm_kwargs,
    ) -> None:
        from propel.models import resolve_model_dir

        if lora_sync not in ("adapter", "merged"):
            raise ConfigError(f"lora_sync must be 'adapter' or 'merged', got {lora_sync!r}")
        vllm = import_vllm()
        cpu_defaults()
        self.model_path = resolve_model_dir(model_path)
        dtype = default_dtype(dtype)
        self.lora, self.lora_sync, self.max_lora_rank, self.dtype = lora, lora_sync, max_lora_rank, dtype
        if lora:
            llm_kwargs.setdefault("max_loras", 1)
        self.llm = vllm.LLM(
            model=self.model_path,
            dtype=dtype,
            max_model_len=max_model_len,
            enforce_eager=enforce_eager,
            seed=seed,
            enable_lora=lora,
            max_lora_rank=max_lora_rank,
            logprobs_mode=LOGPROBS_MODE,
            **llm_kwargs,
        )
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = max_model_len
        self._lora_request = None
        self._full_path: Path | None = None
        self._version = 0
        self._tmp = Path(tempfile.mkdtemp(prefix="propel-vllm-"))

    def sampling_params(self, sampling: SamplingSpec):
        """The ``vllm.SamplingParams`` for a :class:`SamplingSpec` (``logprobs=0``: the sampled token's only)."""
        from vllm import SamplingParams

        if sampling.n < 1 or sampling.max_new_tokens < 1:
            raise ValueError(
                f"sampling.n and sampling.max_new_tokens must be >= 1, got {sampling.n}, {sampling.max_new_tokens}"
            )
        greedy = sampling.temperature == 0
        return SamplingParams(
            n=1 if greedy else sampling.n,  # vLLM refuses n > 1 when greedy; generate() repeats the one answer
            max_tokens=sampling.max_new_tokens,
            temperature=sampling.temperature,
            top_p=1.0 if greedy else sampling.top_p,
            top_k=0 if greedy or not sampling.top_k else sampling.top_k,
            stop=list(sampling.stop) or None,
            logprobs=0 if sampling.logprobs else None,
        )

    def context_length(self) -> int:
        return self.max_model_len

    def generate(self, prompts: Sequence[Prompt], sampling: SamplingSpec) -> list[list[Completion]]:
        from vllm.inputs import TokensPrompt

        params = self.sampling_params(sampling)
        inputs = [TokensPrompt(prompt_token_ids=self.encode_prompt(p)) for p in prompts]
        outputs = self.llm.generate(inputs, params, lora_request=self._lora_request, use_tqdm=False)
        groups = [[completion_from_output(o, sampling.logprobs) for o in r.outputs] for r in outputs]
        return [repeat_greedy(g, sampling.n) for g in groups]

    def update_weights(self, policy) -> None:
        """Sync to ``policy``: a peft model's adapter is hot-loaded under a new id; a full model is copied in."""
        if is_peft(policy) and self.lora_sync == "adapter":
            self._load_adapter(policy)
        elif is_peft(policy):
            self._load_merged(policy)
        else:
            self._load_full(policy)
        self.llm.reset_prefix_cache()  # cached KV blocks were computed with the old weights

    def _load_adapter(self, policy) -> None:
        from vllm.lora.request import LoRARequest

        if not self.lora:
            raise ConfigError("update_weights got a LoRA policy but the engine has lora=False: build it with lora=True")
        if lora_rank(policy) > self.max_lora_rank:
            raise ConfigError(
                f"policy LoRA rank {lora_rank(policy)} > engine max_lora_rank {self.max_lora_rank}: raise max_lora_rank"
            )
        self._version += 1
        path = save_adapter(policy, self._tmp, self._version)
        old = self._lora_request
        self._lora_request = LoRARequest(f"policy-v{self._version}", self._version, str(path))
        if old is not None:
            self.llm.llm_engine.remove_lora(old.lora_int_id)
            shutil.rmtree(old.lora_path, ignore_errors=True)

    def _load_full(self, policy) -> None:
        """Save ``policy`` as a checkpoint folder and have every worker reload its weights in place from it.

        Uses the workers' ``reload_weights`` (vLLM >= 0.2x): checkpoint-format names, tied embeddings and LoRA-wrapped
        layers are handled by vLLM's own loader. The folder stays until the next sync (vLLM now points at it).
        Known gap (measured on vLLM 0.32 CPU): with tied input/output embeddings, an embedding update reaches the input
        embedding only; every other parameter syncs exactly.
        """
        if self._lora_request is not None:
            raise ConfigError("engine holds a LoRA adapter; sync a full model only to an engine without one")
        if getattr(policy.config, "tie_word_embeddings", False):
            warnings.warn(
                "vLLM's in-place reload unties tied embeddings: updates to the input embedding do not reach vLLM's "
                "output head. Freeze the embeddings when fully fine-tuning a tied model with the vllm engine.",
                stacklevel=3,
            )
        self._version += 1
        path = self._tmp / f"full-v{self._version}"
        policy.save_pretrained(str(path))
        self._reload_from(path)

    def _load_merged(self, policy) -> None:
        """Write the policy's merged weights (base + LoRA deltas; embeddings untouched by LoRA) and reload them."""
        import torch
        from safetensors.torch import save_file

        from propel.models.lora import merged_state_dict

        if self._lora_request is not None:
            raise ConfigError("engine holds a LoRA adapter; merged syncs need an engine without one")
        self._version += 1
        path = self._tmp / f"merged-v{self._version}"
        path.mkdir(parents=True)
        weights = merged_state_dict(policy, dtype=getattr(torch, self.dtype) if self.dtype != "auto" else None)
        save_file(weights, str(path / "model.safetensors"), metadata={"format": "pt"})
        policy.get_base_model().config.save_pretrained(str(path))
        self._reload_from(path)

    def _reload_from(self, path: Path) -> None:
        """Have every worker reload its weights in place from the checkpoint folder ``path``."""
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(path)})
        if self._full_path is not None:
            shutil.rmtree(self._full_path, ignore_errors=True)
        self._full_path = path

    def close(self) -> None:
        """Shut the engine core down and remove saved adapters."""
        llm, self.llm = getattr(self, "llm", None), None
        if llm is not None:
            engine = getattr(llm, "llm_engine", None)
            shutdown = getattr(getattr(engine, "engine_core", None), "shutdown", None)
            if shutdown is not None:
                shutdown()
            del llm
        shutil.rmtree(self._tmp, ignore_errors=True)
