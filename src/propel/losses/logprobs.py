"""Per-token logprobs of given tokens under the *sampling* distribution (temperature, top-k, top-p applied).

The trainer must score completions under the same distribution the engine sampled from, otherwise the PPO ratio
and the importance correction compare different distributions. Warping reuses transformers' own warpers, so
the semantics (ties, ``min_tokens_to_keep``) are those of ``generate``.
"""

from __future__ import annotations

import torch


def warp_logits(
    logits: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    keep: torch.Tensor | None = None,
) -> torch.Tensor:
    """Temperature-scaled logits with tokens outside top-k / top-p set to ``-inf``; shape ``(..., V)``.

    ``temperature`` 0 (greedy) is treated as 1 (the raw distribution). ``keep`` (token ids, shape ``logits.shape[:-1]``)
    are never masked: a token the engine sampled stays scoreable even if the updated policy would now filter it.
    The top-k / top-p masks are computed without gradient; the gradient flows through the kept logits.
    """
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    scaled = logits / temperature if temperature and temperature != 1.0 else logits
    if not top_k and top_p >= 1.0:
        return scaled
    flat = scaled.detach().reshape(-1, scaled.shape[-1])
    dummy = torch.zeros(flat.shape[0], 1, dtype=torch.long, device=flat.device)
    if top_k:
        flat = TopKLogitsWarper(top_k=top_k)(dummy, flat)
    if top_p < 1.0:
        flat = TopPLogitsWarper(top_p=top_p)(dummy, flat)
    removed = torch.isinf(flat).reshape(scaled.shape)
    if keep is not None:
        removed = removed & ~torch.nn.functional.one_hot(keep, scaled.shape[-1]).bool()
    return scaled.masked_fill(removed, float("-inf"))


def token_logprobs(
    logits: torch.Tensor,
    tokens: torch.Tensor,
    *,
    temperature: float = 1.0,
    top_k: int = 0,
    top_p: float = 1.0,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """``log p(tokens)`` under the warped distribution (fp32), and optionally its entropy; shapes ``(B, T)``.

    Args:
        logits: ``(B, T, V)`` logits predicting ``tokens``.
        tokens: ``(B, T)`` token ids.
    """
    warped = warp_logits(logits.float(), temperature=temperature, top_k=top_k, top_p=top_p, keep=tokens)
    logp_all = torch.log_softmax(warped, dim=-1)
    logp = logp_all.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)
    entropy = None
    if with_entropy:
        with torch.no_grad():
            p = logp_all.exp()
            entropy = -(p * torch.where(p > 0, logp_all, torch.zeros_like(logp_all))).sum(-1)
    return logp, entropy
