"""The ``GenerationConfig`` the HF engine samples under: the trainer's distribution, whatever the model ships.

transformers fills every field a ``GenerationConfig`` leaves unset (None) from ``model.generation_config``, so a
checkpoint's defaults (Qwen2.5-Instruct: ``repetition_penalty: 1.05``) would run as logits processors the trainer
never applies: the engine would record logprobs of another distribution, and since the HF engine is the policy no
importance correction would notice. The trainer scores tokens with ``losses.logprobs.token_logprobs`` (temperature,
top-k, top-p only); every other field that changes what is sampled is set here to its neutral value, and a field
whose only neutral value is "unset" (which the model's config would fill) is refused, by name, when the model's
config sets it.
"""

from __future__ import annotations

from typing import Any

ALWAYS_NEUTRAL: dict[str, Any] = {
    "repetition_penalty": 1.0,
    "encoder_repetition_penalty": 1.0,
    "no_repeat_ngram_size": 0,
    "encoder_no_repeat_ngram_size": 0,
    "min_new_tokens": 0,  # sets min_length (prompt + 0) whatever min_length is: also setting it only adds a warning
    "suppress_tokens": [],
    "begin_suppress_tokens": [],
    "guidance_scale": 1.0,
    "remove_invalid_values": False,
    "renormalize_logits": False,
    "num_beams": 1,
    "num_beam_groups": 1,
    "diversity_penalty": 0.0,
    "num_return_sequences": 1,
}
"""Processors and search settings applied whether sampling or not, at their neutral values."""
SAMPLING_NEUTRAL: dict[str, Any] = {"min_p": 0.0, "typical_p": 1.0, "epsilon_cutoff": 0.0, "eta_cutoff": 0.0}
"""Warpers applied only when sampling (set only then: transformers warns about them in greedy decoding)."""
REFUSED = (
    "bad_words_ids",
    "force_words_ids",
    "constraints",
    "sequence_bias",
    "forced_bos_token_id",
    "forced_eos_token_id",
    "exponential_decay_length_penalty",
    "watermarking_config",
    "top_h",
    "penalty_alpha",
    "dola_layers",
    "prompt_lookup_num_tokens",
    "assistant_early_exit",
    "token_healing",
    "use_mtp",
    "stop_strings",
    "max_time",
)
"""Fields with no neutral value but None: they change the distribution (or end a completion where the engine does
not know it), so a model whose generation config sets one is refused."""


def check_model_generation_config(model_config, set_here: set[str]) -> None:
    """Raise ``ValueError`` naming the first ``REFUSED`` field the model's generation config sets and this engine's
    config (``set_here``: the fields it sets itself) leaves for transformers to fill."""
    for name in REFUSED:
        value = getattr(model_config, name, None)
        if name not in set_here and value not in (None, False):
            raise ValueError(
                f"the model's generation_config sets {name}={value!r}, which changes what HFEngine samples but not "
                f"what the trainer scores; unset it (model.generation_config.{name} = None) before training"
            )


def sampling_generation_config(model, *, greedy: bool, **fields: Any):
    """A ``GenerationConfig`` with ``fields`` (length, ids, temperature/top-k/top-p, stop strings) and every other
    distribution-changing field neutral; refuses a model whose own config would add a processor (``REFUSED``)."""
    from transformers import GenerationConfig

    values = {**ALWAYS_NEUTRAL, **({} if greedy else SAMPLING_NEUTRAL), **fields, "do_sample": not greedy}
    model_config = getattr(model, "generation_config", None)
    if model_config is not None:
        check_model_generation_config(model_config, {k for k, v in values.items() if v is not None})
    return GenerationConfig(**values)
