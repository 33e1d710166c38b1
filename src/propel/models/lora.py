"""LoRA wrapping with peft; defaults from DESIGN.md (r=16, alpha=32, dropout 0.05, all 7 projections)."""

from __future__ import annotations

from dataclasses import dataclass, field

ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LoRASpec:
    """LoRA adapter settings."""

    r: int = 16
    """Adapter rank."""
    alpha: int = 32
    """Scaling numerator (scale = alpha / r)."""
    dropout: float = 0.05
    """Dropout on the adapter input."""
    target_modules: list[str] = field(default_factory=lambda: list(ALL_PROJECTIONS))
    """Module names to adapt."""


def apply_lora(model, spec: LoRASpec | None = None):
    """Wrap ``model`` in a peft LoRA model; only adapter weights are trainable."""
    from peft import LoraConfig, get_peft_model

    spec = spec or LoRASpec()
    config = LoraConfig(
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=spec.dropout,
        target_modules=list(spec.target_modules),
        task_type="CAUSAL_LM",
        bias="none",
    )
    return get_peft_model(model, config)
