"""Read hidden states of a frozen reference model at chosen layers, stopping the forward pass at the deepest one.

Layer ``l`` means ``hidden_states[l]`` of an ``output_hidden_states=True`` forward: 0 is the input of the first
decoder layer (the embeddings), ``l >= 1`` the output of decoder layer ``l - 1``, and the last layer gets the final
norm, as in HF. Forward hooks capture the requested layers and the deepest one raises a private exception, so
layers above it never run (no ``output_hidden_states``, no LM head). Position ids come from the attention mask, so a
text's features do not depend on its batch's padding.

Texts longer than ``max_length`` tokens are truncated from the left (their first tokens are dropped), so
``last_token`` and the ``mean_last_*`` poolings read the text's real end, not a token from its middle. A text that
tokenizes to nothing (e.g. an empty completion) is read as the single token ``bos`` (``eos`` when the tokenizer
has no BOS), so it gets a defined feature instead of crashing a training step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from propel.probes.pooling import TRAJECTORY_POOLINGS, check_poolings, pool, pool_turns


def feature_key(layer: int, pooling: str) -> str:
    """Name of one (layer, pooling) feature block in caches and feature files."""
    return f"layer{layer}/{pooling}"


class _StopForward(Exception):
    """Raised by the deepest hook to end the forward pass early; never escapes this module."""


def decoder_parts(model) -> tuple[torch.nn.Module, torch.nn.ModuleList, torch.nn.Module | None]:
    """The decoder stack of a causal LM (peft-wrapped or not): ``(decoder, layers, final_norm)``."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    decoder = base.get_decoder() if hasattr(base, "get_decoder") else getattr(base, "model", base)
    layers = getattr(decoder, "layers", None)
    if layers is None:
        layers = getattr(decoder, "h", None)
    if layers is None:
        raise ValueError(f"model: cannot find decoder layers on {type(base).__name__} (expected .layers or .h)")
    norm = getattr(decoder, "norm", None)
    if norm is None:
        norm = getattr(decoder, "ln_f", None)
    return decoder, layers, norm


def num_layers(model) -> int:
    """Number of decoder layers; valid layer indices are ``0..num_layers``."""
    return len(decoder_parts(model)[1])


def position_ids_from_mask(attention_mask: Tensor) -> Tensor:
    """Positions counted over valid tokens only, so left and right padding give the same positions."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


@torch.no_grad()
def hidden_states_at(model, input_ids: Tensor, attention_mask: Tensor, layers: Sequence[int]) -> dict[int, Tensor]:
    """Hidden states ``{layer: [B, T, D]}`` at ``layers``; decoder layers above the deepest one never run."""
    decoder, blocks, norm = decoder_parts(model)
    depth = len(blocks)
    layers = sorted(set(int(layer) for layer in layers))
    if not layers or layers[0] < 0 or layers[-1] > depth:
        raise ValueError(f"layers: each layer must be in 0..{depth} for this model, got {layers}")
    deepest = layers[-1]
    captured: dict[int, Tensor] = {}

    def capture_input(_module, args, kwargs):
        captured[0] = args[0] if args else kwargs["hidden_states"]
        if deepest == 0:
            raise _StopForward

    def capture_output(layer: int):
        def hook(_module, _args, output):
            captured[layer] = output[0] if isinstance(output, (tuple, list)) else output
            if layer == deepest:
                raise _StopForward

        return hook

    handles = []
    if 0 in layers:
        handles.append(blocks[0].register_forward_pre_hook(capture_input, with_kwargs=True))
    handles += [blocks[layer - 1].register_forward_hook(capture_output(layer)) for layer in layers if layer > 0]
    try:
        decoder(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids_from_mask(attention_mask),
            use_cache=False,
        )
    except _StopForward:
        pass
    finally:
        for handle in handles:
            handle.remove()
    missing = [layer for layer in layers if layer not in captured]
    if missing:
        raise RuntimeError(f"hooks did not capture layers {missing}; the model's forward skipped its decoder layers")
    if depth in captured and norm is not None:
        captured[depth] = norm(captured[depth])
    return {layer: captured[layer] for layer in layers}


def _device(model) -> torch.device:
    return next(model.parameters()).device


class ActivationExtractor:
    """Pooled fp32 features of texts (or per-turn trajectories) at several layers and poolings in one pass.

    Args:
        model: the frozen reference causal LM (a peft model is read with its adapters disabled).
        tokenizer: its tokenizer (either padding side works).
        layers: layer indices (see module docstring).
        poolings: token pooling rules from ``propel.probes.pooling.POOLINGS``.
        batch_size: texts per forward pass (texts are sorted by length to cut padding).
        max_length: truncation length in tokens; longer texts keep their last ``max_length`` tokens.
        trajectory_pooling: how per-turn vectors of a trajectory are aggregated (mean, last, max).
    """

    def __init__(
        self,
        model,
        tokenizer,
        layers: Sequence[int],
        poolings: Sequence[str] = ("last_token",),
        *,
        batch_size: int = 8,
        max_length: int = 1024,
        trajectory_pooling: str = "mean",
    ):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if max_length < 1:
            raise ValueError(f"max_length must be >= 1, got {max_length}")
        check_poolings(trajectory_pooling, TRAJECTORY_POOLINGS, field="trajectory_pooling")
        self.model = model
        self.tokenizer = tokenizer
        self.layers = sorted(set(int(layer) for layer in layers))
        depth = num_layers(model)
        if not self.layers or self.layers[0] < 0 or self.layers[-1] > depth:
            raise ValueError(f"layers: each layer must be in 0..{depth} for this model, got {list(layers)}")
        self.poolings = check_poolings(poolings)
        self.batch_size = batch_size
        self.max_length = max_length
        self.trajectory_pooling = trajectory_pooling

    @property
    def keys(self) -> list[str]:
        """Feature block names this extractor produces."""
        return [feature_key(layer, p) for layer in self.layers for p in self.poolings]

    def _tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids of each text: the last ``max_length`` of them, or ``[empty_id]`` when there are none."""
        ids = self.tokenizer(list(texts), truncation=False, verbose=False)["input_ids"]
        return [row[-self.max_length :] if row else [self.empty_id] for row in ids]

    @property
    def empty_id(self) -> int:
        """The token an empty text is read as (BOS, else EOS)."""
        tok = self.tokenizer
        token = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
        if token is None:
            raise ValueError("tokenizer: has neither a BOS nor an EOS token to read an empty text as")
        return int(token)

    @torch.no_grad()
    def encode_ids(self, ids: list[list[int]]) -> dict[str, Tensor]:
        """Pool one batch of token id lists into ``{key: [B, D]}`` fp32 on CPU."""
        from propel.models.reference import reference_forward

        batch = self.tokenizer.pad({"input_ids": ids}, return_tensors="pt")
        device = _device(self.model)
        input_ids, mask = batch["input_ids"].to(device), batch["attention_mask"].to(device)
        with reference_forward(self.model):
            states = hidden_states_at(self.model, input_ids, mask, self.layers)
        return {
            feature_key(layer, p): pool(states[layer], mask, p).cpu() for layer in self.layers for p in self.poolings
        }

    def encode_texts(self, texts: Sequence[str], on_batch: Callable[[int], None] | None = None) -> dict[str, Tensor]:
        """Features ``{key: [N, D]}`` of single texts, in input order."""
        ids = self._tokenize(texts)
        order = sorted(range(len(ids)), key=lambda i: -len(ids[i]))
        parts: dict[str, list[Tensor]] = {k: [] for k in self.keys}
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out = self.encode_ids([ids[i] for i in chunk])
            for k, v in out.items():
                parts[k].append(v)
            if on_batch is not None:
                on_batch(len(chunk))
        inverse = torch.empty(len(order), dtype=torch.long)
        inverse[torch.tensor(order, dtype=torch.long)] = torch.arange(len(order))
        return {k: torch.cat(v)[inverse] for k, v in parts.items()}

    def encode_trajectories(
        self, trajectories: Sequence[Sequence[str]], on_batch: Callable[[int], None] | None = None
    ) -> dict[str, Tensor]:
        """Features ``{key: [N, D]}`` of trajectories: each turn pooled over tokens, then across turns."""
        flat = [turn for traj in trajectories for turn in traj]
        lengths = [len(traj) for traj in trajectories]
        if any(n == 0 for n in lengths):
            raise ValueError("trajectories: every trajectory needs at least one turn")
        per_turn = self.encode_texts(flat, on_batch=on_batch)
        out = {}
        for key, feats in per_turn.items():
            groups = torch.split(feats, lengths)
            out[key] = torch.stack([pool_turns(g, self.trajectory_pooling) for g in groups])
        return out

    def encode(self, items: Sequence, on_batch: Callable[[int], None] | None = None) -> dict[str, Tensor]:
        """Texts (``list[str]``) or trajectories (``list[list[str]]``) to ``{key: [N, D]}`` fp32 features."""
        if len(items) == 0:
            raise ValueError("items: nothing to extract (empty list)")
        if isinstance(items[0], str):
            return self.encode_texts(items, on_batch=on_batch)
        return self.encode_trajectories(items, on_batch=on_batch)
