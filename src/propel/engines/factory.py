"""Build a rollout engine by kind, so configs pick ``hf`` / ``vllm`` / ``vllm_server`` with one string."""

from __future__ import annotations

from typing import Literal

from propel.engines.engine import Engine
from propel.errors import ConfigError

EngineKind = Literal["hf", "vllm", "vllm_server"]
KINDS: tuple[str, ...] = ("hf", "vllm", "vllm_server")


def make_engine(kind: EngineKind, model_name: str, *, model=None, tokenizer=None, **kwargs) -> Engine:
    """A rollout engine for ``model_name``.

    Args:
        kind: ``hf`` (HF ``generate`` on the live policy), ``vllm`` (in-process vLLM) or ``vllm_server``
            (OpenAI-compatible vLLM servers; pass ``base_url=...``, a list of them for a fleet, or ``launch=True``
            with ``replicas=N``; ``routing`` and ``cooldown_s`` choose how the fleet spreads and retries requests).
        model_name: bundled alias, local folder or hub id of the base model.
        model: ``hf`` only: the live (possibly peft) policy to generate with; loaded from ``model_name`` if omitted
            (``dtype`` and ``device`` kwargs then apply to the load).
        tokenizer: its tokenizer (``hf``, ``vllm_server``); loaded from ``model_name`` if omitted.
        kwargs: passed to the engine class (``HFEngine``, ``VLLMEngine``, ``VLLMServerEngine``).
    """
    if kind == "hf":
        from propel.engines.hf import HFEngine

        if model is None:
            from propel.models import load_model

            model, loaded_tok = load_model(
                model_name, dtype=kwargs.pop("dtype", "float32"), device=kwargs.pop("device", "cpu")
            )
            tokenizer = tokenizer or loaded_tok
        if tokenizer is None:
            from propel.models import load_tokenizer

            tokenizer = load_tokenizer(model_name)
        return HFEngine(model, tokenizer, **kwargs)
    if kind == "vllm":
        from propel.engines.vllm import VLLMEngine

        return VLLMEngine(model_name, **kwargs)
    if kind == "vllm_server":
        from propel.engines.vllm_server import VLLMServerEngine

        kwargs.setdefault("tokenizer", tokenizer)
        return VLLMServerEngine(model_name, **kwargs)
    raise ConfigError(f"engine kind must be one of {KINDS}, got {kind!r}")


def check_kind(kind: str) -> str:
    """``kind`` if it names an engine, else a :class:`ConfigError` listing the choices."""
    if kind not in KINDS:
        raise ConfigError(f"engine must be one of {KINDS}, got {kind!r}")
    return kind


def make_policy_engine(kind: EngineKind, model_name: str, policy, tokenizer, lora_rank: int = 16, **kwargs) -> Engine:
    """A rollout engine that follows a (LoRA) ``policy``: HF generates with the policy itself; vLLM engines start
    on the base model with LoRA enabled and are synced with ``update_weights(policy)``."""
    if check_kind(kind) == "hf":
        return make_engine("hf", model_name, model=policy, tokenizer=tokenizer, **kwargs)
    from propel.engines.vllm import is_peft  # no vllm import at module level

    if is_peft(policy) and kwargs.get("lora_sync", "adapter") == "adapter":
        kwargs.setdefault("lora", True)
        kwargs.setdefault("max_lora_rank", max(16, lora_rank))
    engine = make_engine(kind, model_name, tokenizer=tokenizer, **kwargs)
    engine.update_weights(policy)
    return engine


def make_adapter_engine(
    kind: EngineKind, model_name: str, adapter: str | None, *, dtype: str = "float32", device: str = "cpu", **kwargs
) -> Engine:
    """A rollout engine sampling ``model_name`` plus a LoRA ``adapter`` (a peft folder or a GRPO ``.ckpt``; None:
    the base model): merged into the weights for ``hf``, hot-loaded for the vLLM engines. The model is a copy of
    its own, so a frozen reference loaded elsewhere stays adapter-free."""
    from propel.models.trained_policy import load_policy, lora_rank_of

    model, tokenizer = load_policy(model_name, adapter, dtype=dtype, device=device, merge=kind == "hf")
    return make_policy_engine(kind, model_name, model, tokenizer, lora_rank=lora_rank_of(model), **kwargs)
