"""GPU memory of a GRPO run, estimated from a model's config numbers: weights, LoRA, gradients and optimizer state,
activations, logits, and the rollout engine's weights and KV cache.

Rules (bytes), for a decoder-only transformer with SwiGLU MLP and grouped-query attention:

- weights: parameters x dtype size (bf16: 2);
- trainable state: LoRA parameters in fp32 with fp32 gradients and two AdamW moments (16 B each); a full
  fine-tune keeps bf16 weights plus fp32 master weights, gradients and moments (16 B per parameter on top);
- activations (Korthikanti et al. 2022, flash attention, so no s^2 term): 34 h bytes per token per layer kept for
  backward, or 2 h per token per layer with gradient checkpointing plus one layer's 34 h;
- logits: fp32 logits and their gradient, 8 V bytes per token (the largest single tensor at 150k vocabularies);
- vLLM: its own bf16 weights plus a KV cache of 2 x layers x kv_heads x head_dim x 2 bytes per token, for every
  token of the rollouts in flight (prompt + completion) when colocated or on its own GPU.

These are estimates for planning (which GPU, colocated or not, micro-batch size); CUDA context, allocator
fragmentation and NCCL buffers add roughly 1-3 GiB per GPU, which ``overhead_gib`` stands for.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

GIB = 2**30


@dataclass(frozen=True)
class ArchSpec:
    """The config numbers the estimate needs (``config.json`` keys in brackets)."""

    hidden: int
    """Model width [hidden_size]."""
    layers: int
    """Decoder layers [num_hidden_layers]."""
    heads: int
    """Query heads [num_attention_heads]."""
    kv_heads: int
    """Key/value heads [num_key_value_heads]."""
    intermediate: int
    """MLP width [intermediate_size]."""
    vocab: int
    """Vocabulary [vocab_size]."""
    head_dim: int | None = None
    """Per-head width [head_dim]; default hidden // heads."""
    tied: bool = False
    """Input and output embeddings shared [tie_word_embeddings]."""
    qkv_bias: bool = False
    """Biases on q/k/v projections (Qwen2)."""

    @property
    def dim(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @classmethod
    def from_config(cls, config) -> ArchSpec:
        """From a ``transformers`` config object or its ``config.json`` dict."""
        get = config.get if isinstance(config, dict) else lambda k, d=None: getattr(config, k, d)
        return cls(
            hidden=get("hidden_size"),
            layers=get("num_hidden_layers"),
            heads=get("num_attention_heads"),
            kv_heads=get("num_key_value_heads") or get("num_attention_heads"),
            intermediate=get("intermediate_size"),
            vocab=get("vocab_size"),
            head_dim=get("head_dim"),
            tied=bool(get("tie_word_embeddings", False)),
            qkv_bias=bool(get("attention_bias", False)) or get("model_type") == "qwen2",
        )

    def projection_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each of the 7 projections of one layer."""
        q, kv = self.heads * self.dim, self.kv_heads * self.dim
        return {
            "q_proj": (self.hidden, q),
            "k_proj": (self.hidden, kv),
            "v_proj": (self.hidden, kv),
            "o_proj": (q, self.hidden),
            "gate_proj": (self.hidden, self.intermediate),
            "up_proj": (self.hidden, self.intermediate),
            "down_proj": (self.intermediate, self.hidden),
        }

    def params(self) -> int:
        """Parameter count: embeddings (twice if untied), projections, biases, RMSNorm weights."""
        shapes = self.projection_shapes()
        per_layer = sum(i * o for i, o in shapes.values()) + 2 * self.hidden
        if self.qkv_bias:
            per_layer += shapes["q_proj"][1] + 2 * shapes["k_proj"][1]
        embed = self.vocab * self.hidden * (1 if self.tied else 2)
        return embed + self.layers * per_layer + self.hidden


# Published config.json numbers. "Qwen/Qwen3.5-4B" (the PROPEL paper's generator) was not reachable here: its entry uses
# Qwen3-4B's numbers as a stand-in; pass the real config (``ArchSpec.from_config``) when you have it.
KNOWN: dict[str, ArchSpec] = {
    "Qwen/Qwen2.5-3B-Instruct": ArchSpec(2048, 36, 16, 2, 11008, 151936, tied=True, qkv_bias=True),
    "Qwen/Qwen2.5-7B-Instruct": ArchSpec(3584, 28, 28, 4, 18944, 152064, qkv_bias=True),
    "Qwen/Qwen3-4B": ArchSpec(2560, 36, 32, 8, 9728, 151936, head_dim=128, tied=True),
    "Qwen/Qwen3.5-4B": ArchSpec(2560, 36, 32, 8, 9728, 151936, head_dim=128, tied=True),
    "smollm2-135m-instruct": ArchSpec(576, 30, 9, 3, 1536, 49152, tied=True),
}


def lora_params(arch: ArchSpec, r: int, targets: tuple[str, ...] | list[str] | None = None) -> int:
    """LoRA parameters: ``r * (in + out)`` per adapted projection per layer (A is r x in, B is out x r)."""
    shapes = arch.projection_shapes()
    names = list(targets) if targets is not None else list(shapes)
    return arch.layers * sum(r * sum(shapes[n]) for n in names)


def kv_cache_bytes(arch: ArchSpec, tokens: int, dtype_bytes: int = 2) -> int:
    """KV cache for ``tokens`` tokens (keys and values, every layer)."""
    return 2 * arch.layers * arch.kv_heads * arch.dim * dtype_bytes * tokens


@dataclass
class MemoryEstimate:
    """Bytes per GPU, by part."""

    weights: int
    trainable_state: int
    activations: int
    logits: int
    engine_weights: int
    kv_cache: int
    overhead: int

    @property
    def total(self) -> int:
        return sum(asdict(self).values())

    def rows(self) -> list[tuple[str, float]]:
        """(part, GiB) for each part and the total."""
        return [(k, v / GIB) for k, v in asdict(self).items()] + [("total", self.total / GIB)]


def estimate_grpo_memory(
    arch: ArchSpec,
    *,
    lora_r: int | None = 16,
    dtype_bytes: int = 2,
    micro_batch: int = 8,
    seq_len: int = 1024,
    gradient_checkpointing: bool = False,
    engine: str = "vllm",
    rollout_tokens: int = 0,
    engine_on_this_gpu: bool = True,
    overhead_gib: float = 2.0,
) -> MemoryEstimate:
    """Memory of one training GPU (DDP: every GPU holds all of it).

    Args:
        arch: the policy's architecture.
        lora_r: LoRA rank on all 7 projections; None for a full fine-tune.
        dtype_bytes: weight dtype size (bf16: 2).
        micro_batch: sequences per forward/backward.
        seq_len: prompt + completion tokens per sequence.
        gradient_checkpointing: keep only each layer's input for backward.
        engine: ``hf`` (generates with the policy's own weights: KV cache only), ``vllm`` or ``vllm_server``.
        rollout_tokens: tokens in flight during generation (contexts x group size x seq_len).
        engine_on_this_gpu: False when vLLM runs on its own GPU (its weights and KV cache are then not counted here).
        overhead_gib: CUDA context, allocator and communication buffers.
    """
    n = arch.params()
    weights = n * dtype_bytes
    if lora_r is None:
        trainable = n * 16  # fp32 master weights, gradients, two AdamW moments
    else:
        trainable = lora_params(arch, lora_r) * 16
    tokens = micro_batch * seq_len
    per_layer = 2 * arch.hidden if gradient_checkpointing else 34 * arch.hidden
    activations = tokens * per_layer * arch.layers + (tokens * 34 * arch.hidden if gradient_checkpointing else 0)
    logits = tokens * arch.vocab * 8
    engine_weights = kv = 0
    if engine == "hf":
        kv = kv_cache_bytes(arch, rollout_tokens, dtype_bytes)
    elif engine_on_this_gpu:
        engine_weights = weights
        kv = kv_cache_bytes(arch, rollout_tokens, dtype_bytes)
    return MemoryEstimate(
        weights=weights,
        trainable_state=trainable,
        activations=activations,
        logits=logits,
        engine_weights=engine_weights,
        kv_cache=kv,
        overhead=int(overhead_gib * GIB),
    )


def estimate_serving_memory(arch: ArchSpec, *, tokens_in_flight: int, dtype_bytes: int = 2, overhead_gib: float = 2.0):
    """Memory of a vLLM server (a solver, or a rollout server on its own GPU): weights + KV cache + overhead."""
    return MemoryEstimate(
        weights=0,
        trainable_state=0,
        activations=0,
        logits=0,
        engine_weights=arch.params() * dtype_bytes,
        kv_cache=kv_cache_bytes(arch, tokens_in_flight, dtype_bytes),
        overhead=int(overhead_gib * GIB),
    )
