"""A trained generator for sampling: the base model plus a LoRA adapter from a peft folder or a GRPO checkpoint."""

from __future__ import annotations

from pathlib import Path

from propel.errors import ConfigError


def load_policy(
    model: str, adapter: str | None = None, *, dtype: str = "float32", device: str = "cpu", merge: bool = True
):
    """``(model, tokenizer)`` of a base model plus, optionally, a LoRA adapter (merged in for fast HF generation,
    or kept as a peft model for engines that hot-load adapters).

    Args:
        model: base model (alias, folder, ``.gguf``, hub id).
        adapter: a peft adapter folder (``adapter_config.json``; what ``AdapterSaver`` writes) or a GRPO ``.ckpt``.
        dtype: model dtype.
        device: torch device.
        merge: merge the adapter into the base weights; False returns the peft model.
    """
    from propel.models import load_model

    base, tokenizer = load_model(model, dtype=dtype, device=device)
    if adapter is None:
        return base, tokenizer
    path = Path(adapter)
    if (path / "adapter_config.json").exists():
        from peft import PeftModel

        policy = PeftModel.from_pretrained(base, str(path))
    elif path.is_file() and path.suffix == ".ckpt":
        policy = _from_checkpoint(base, path)
    else:
        raise ConfigError(f"model.adapter {adapter!r} is neither a peft adapter folder nor a GRPO .ckpt file")
    if not merge:
        return policy.to(device).eval(), tokenizer
    return policy.merge_and_unload().to(device).eval(), tokenizer


def _from_checkpoint(base, path: Path):
    from dataclasses import fields

    import torch

    from propel.models import LoRASpec, apply_lora

    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if "lora_spec" not in ckpt:
        raise ConfigError(f"model.adapter {path} has no `lora_spec`: it was not written by GRPOModule")
    known = {f.name for f in fields(LoRASpec)}  # checkpoints from before LoRA dropout was dropped hold `dropout`
    policy = apply_lora(base, LoRASpec(**{k: v for k, v in ckpt["lora_spec"].items() if k in known}))
    weights = {k.removeprefix("policy."): v for k, v in ckpt["state_dict"].items()}
    result = policy.load_state_dict(weights, strict=False)
    expected = {k for k in policy.state_dict() if "lora_" in k}
    if result.unexpected_keys or expected - set(weights):
        raise ConfigError(
            f"model.adapter {path}: LoRA weights do not match the base model {result.unexpected_keys[:3]}"
        )
    return policy


def lora_rank_of(model) -> int:
    """Largest LoRA rank of a peft model's adapters (0 for a plain model)."""
    configs = getattr(model, "peft_config", None) or {}
    return max((int(getattr(c, "r", 0)) for c in configs.values()), default=0)
