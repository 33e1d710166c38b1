"""LoRA wrapping with peft; defaults r=16, alpha=32, on all 7 attention and MLP projections.

No LoRA dropout: the trainers run every forward of a step with dropout off (sampling, the frozen old/reference
logprobs and the loss forward), so that the PPO ratio is exactly 1 before an update and the importance weights see
no dropout noise. A dropout setting would never act, so there is none; the adapters are built with
``lora_dropout=0``, which peft makes an identity.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field

ALL_PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass
class LoRASpec:
    """LoRA adapter settings."""

    r: int = 16
    """Adapter rank."""
    alpha: int = 32
    """Scaling numerator (scale = alpha / r)."""
    target_modules: list[str] = field(default_factory=lambda: list(ALL_PROJECTIONS))
    """Module names to adapt."""


def peft_lora_config(spec: LoRASpec | None = None):
    """``spec`` as peft's ``LoraConfig`` (no dropout, no bias): what propel trains, and what a TRL run given the same
    spec trains."""
    from peft import LoraConfig

    spec = spec or LoRASpec()
    return LoraConfig(
        r=spec.r,
        lora_alpha=spec.alpha,
        lora_dropout=0.0,
        target_modules=list(spec.target_modules),
        task_type="CAUSAL_LM",
        bias="none",
    )


def apply_lora(model, spec: LoRASpec | None = None):
    """Wrap ``model`` in a peft LoRA model; only adapter weights are trainable."""
    from peft import get_peft_model

    return get_peft_model(model, peft_lora_config(spec))


def _merged_weight(module):
    """``W + sum of the active adapters' deltas`` of one LoRA layer (``W`` itself is never written to)."""
    weight = module.get_base_layer().weight.detach()
    for adapter in module.active_adapters:
        if adapter in module.lora_A:
            weight = weight + module.get_delta_weight(adapter).to(weight.dtype)  # out of place: a new tensor
    return weight


@contextmanager
def merged_lora_view(policy):
    """Inside, ``policy`` runs as one plain model with every active LoRA delta folded into its weights (one matmul
    per adapted layer instead of the adapter path at every token: what makes sampling fast).

    Unlike peft's ``merge_adapter``/``unmerge_adapter``, whose add-then-subtract round trip leaves rounding drift
    in the base weights (the KL reference) at every call and so breaks exact resume, the merged weights are new
    tensors swapped in and the original ones swapped back: the base weights come back bit for bit. Costs one extra
    copy of the adapted weights while inside.
    """
    import torch
    from peft.tuners.lora import LoraLayer

    layers = [m for m in policy.modules() if isinstance(m, LoraLayer)]
    if not layers or any(m.disable_adapters or m.merged for m in layers):
        yield policy  # adapters already off (e.g. inside ``disable_adapter``) or merged: nothing to fold in
        return
    swapped = []
    try:
        with torch.no_grad():
            for module in layers:
                weight = module.get_base_layer().weight
                merged = _merged_weight(module)
                swapped.append((weight, weight.data))
                weight.data = merged
        with policy.disable_adapter():  # the adapter path off: the swapped-in weights already hold it
            yield policy
    finally:
        for weight, original in swapped:
            weight.data = original


def merged_state_dict(policy, dtype=None) -> dict:
    """The base model's weights, under its own (HF) names, with every active LoRA delta added; ``policy`` is left
    untouched (peft's merge/unmerge round trip would leave rounding drift in the base weights).

    What a rollout engine without LoRA support (or with slow LoRA kernels, e.g. vLLM on CPU) loads as full weights.
    Tied output embeddings are left out (the loader ties them back).
    """
    import torch
    from peft.tuners.lora import LoraLayer

    base = policy.get_base_model()
    out: dict[str, torch.Tensor] = {}
    with torch.no_grad():
        lora_modules = {name: _merged_weight(m) for name, m in base.named_modules() if isinstance(m, LoraLayer)}
        for key, value in base.state_dict().items():
            if "lora_" in key:
                continue
            key = key.replace(".base_layer.", ".")
            out[key] = value.detach()
        for name, weight in lora_modules.items():
            out[f"{name}.weight"] = weight
        if getattr(base.config, "tie_word_embeddings", False):
            out.pop("lm_head.weight", None)
    if dtype is not None:
        out = {k: v.to(dtype) for k, v in out.items()}
    return {k: v.contiguous() for k, v in out.items()}
