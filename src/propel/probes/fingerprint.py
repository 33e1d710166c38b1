"""What a probe's features depend on besides the text: the reference model's weights, dtype and width, and its
tokenizer, as short hashes.

The activation cache keys its folders by them and a probe artifact stores them, so a cache never serves features of
other weights and a probe bound to another model fails at bind time with a one-line error instead of scoring
garbage. A model's fingerprint hashes a strided sample of every base weight (LoRA adapters and ``modules_to_save``
copies left out, so a peft policy read with adapters disabled matches its base), in order, with shapes.
"""

from __future__ import annotations

import contextlib
import hashlib
import json

import torch

SAMPLE_PER_TENSOR = 256
"""Elements hashed per weight tensor: enough to tell fine-tunes apart, cheap for any model size."""


def _base(model):
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def model_fingerprint(model) -> str:
    """Hash of the base weights of a causal LM (a strided sample of each tensor, with its shape)."""
    digest = hashlib.sha256()
    for name, param in _base(model).named_parameters():
        if "lora_" in name or "modules_to_save" in name:
            continue
        flat = param.detach().reshape(-1)
        step = max(1, flat.numel() // SAMPLE_PER_TENSOR)
        sample = flat[::step][:SAMPLE_PER_TENSOR].float().cpu().contiguous()
        digest.update(str(tuple(param.shape)).encode())
        digest.update(sample.numpy().tobytes())
    return digest.hexdigest()[:16]


def tokenizer_fingerprint(tokenizer) -> str:
    """Hash of what turns a text into ids: the fast tokenizer's full definition (vocabulary, merges, normalizer,
    special tokens; its per-call padding and truncation state left out), else the vocabulary and special tokens.

    Memoized on the tokenizer for its current size (adding tokens recomputes it): hashing a vocabulary takes ~1 s.
    """
    memo = getattr(tokenizer, "_propel_fingerprint", None)
    if memo is not None and memo[0] == len(tokenizer):
        return memo[1]
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("padding", None), spec.pop("truncation", None)
    else:
        spec = sorted(tokenizer.get_vocab().items())
    special = getattr(tokenizer, "special_tokens_map", {})
    text = json.dumps([type(tokenizer).__name__, spec, special], sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()[:16]
    with contextlib.suppress(AttributeError):  # a tokenizer that takes no new attributes is hashed each time
        tokenizer._propel_fingerprint = (len(tokenizer), digest)
    return digest


def model_dtype(model) -> str:
    """Dtype of the model's weights as a name (``float32``, ``bfloat16``, ...)."""
    return str(next(_base(model).parameters()).dtype).removeprefix("torch.")


def hidden_size(model) -> int:
    """Width of the model's hidden states (what ``pooled_dim`` scales)."""
    return int(_base(model).config.hidden_size)


def model_name(model) -> str:
    """The name or folder the model was loaded from, for error messages."""
    return str(getattr(_base(model).config, "_name_or_path", "") or type(_base(model)).__name__)


def reference_fingerprint(model, tokenizer) -> dict:
    """``{"model", "dtype", "hidden_size", "tokenizer"}``: stored in cache metadata and probe artifacts."""
    with torch.no_grad():
        return {
            "model": model_fingerprint(model),
            "dtype": model_dtype(model),
            "hidden_size": hidden_size(model),
            "tokenizer": tokenizer_fingerprint(tokenizer),
        }
