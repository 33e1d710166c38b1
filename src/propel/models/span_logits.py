"""Logits over a span of each row: what a trainer needs to score the tokens after a prompt (or before a turn's end).

The LM head is the largest matmul of a small model's forward; it runs only over the last positions any row needs
(``logits_to_keep``), then each row's span is gathered, so rows whose spans start at different positions share one
forward. No KV cache is built (``use_cache=False``): a scoring forward never reads it back.
"""

from __future__ import annotations

import torch


def span_logits(
    model, input_ids: torch.Tensor, attention_mask: torch.Tensor, starts: torch.Tensor, length: int
) -> torch.Tensor:
    """``(B, length, V)`` logits predicting tokens ``starts[b] .. starts[b] + length - 1`` of each row of the
    right-padded ``input_ids`` (positions past the row's end repeat the last kept one; mask them out)."""
    starts = starts.to(input_ids.device)
    first = int(starts.min()) - 1
    keep = input_ids.shape[1] - first
    logits = model(input_ids=input_ids, attention_mask=attention_mask, logits_to_keep=keep, use_cache=False).logits
    offsets = torch.arange(length, device=input_ids.device)[None, :]
    index = (starts[:, None] - 1 - first + offsets).clamp(max=keep - 1)
    return logits.gather(1, index[..., None].expand(-1, -1, logits.shape[-1]))
