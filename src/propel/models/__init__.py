"""Model loading (alias, folder, GGUF, hub id), LoRA wrapping and frozen references."""

from propel.models.bundled import BUNDLED_ALIASES, bundled_model_dir
from propel.models.loading import load_model, load_tokenizer, resolve_model_dir
from propel.models.lora import ALL_PROJECTIONS, LoRASpec, apply_lora
from propel.models.reference import freeze, frozen_copy, reference_forward
from propel.models.span_logits import span_logits

__all__ = [
    "ALL_PROJECTIONS",
    "BUNDLED_ALIASES",
    "LoRASpec",
    "apply_lora",
    "bundled_model_dir",
    "freeze",
    "frozen_copy",
    "load_model",
    "load_tokenizer",
    "reference_forward",
    "resolve_model_dir",
    "span_logits",
]
