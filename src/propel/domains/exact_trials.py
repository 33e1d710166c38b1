"""Solve probabilities by teacher forcing: what n sampled solver trials estimate, computed in one forward pass.

Where a domain's right answer has one canonical text (``Domain.answer_text``), the probability that one sampled
attempt is right is the probability of that text under the solver's sampling distribution, times the probability
that the next token does not extend it. A label from 8 sampled trials at p = 0.05 is close to a coin flip; p itself
is not, and the band utility ``P(lo <= Bin(n, p) <= hi)`` is the expected value of the sampled in-band label. The
sampled and exact rates are compared on the same tasks by ``experiments/probe_ranking/run.py``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from functools import lru_cache

import torch
from scipy.stats import binom

from propel.domains.interface import Domain
from propel.engines.engine import Engine
from propel.losses.logprobs import warp_logits
from propel.records import Task


def band_utility(p: float, n_trials: int, band: tuple[int, int]) -> float:
    """``P(lo <= Bin(n_trials, p) <= hi)``: the chance that ``n_trials`` attempts at solve rate ``p`` land in the
    inclusive band, i.e. the expected in-band label of a task."""
    lo, hi = band
    return float(binom.cdf(hi, n_trials, p) - (binom.cdf(lo - 1, n_trials, p) if lo > 0 else 0.0))


@lru_cache(maxsize=8)
def _token_texts(tokenizer) -> tuple[str, ...]:
    return tuple(tokenizer.decode([i]) for i in range(len(tokenizer)))


@lru_cache(maxsize=8)
def _extends_mask(tokenizer, pattern: str, vocab: int) -> torch.Tensor:
    """Which vocabulary ids start with text matching ``pattern`` (they continue the answer); computed once per
    tokenizer and pattern, not per call."""
    mask = torch.zeros(vocab, dtype=torch.bool)
    if pattern:
        rx = re.compile(pattern)
        for i, text in enumerate(_token_texts(tokenizer)[:vocab]):
            if rx.match(text):
                mask[i] = True
    return mask


@torch.no_grad()
def solve_probabilities(
    domain: Domain,
    tasks: Sequence[Task],
    engine: Engine,
    *,
    temperature: float = 1.0,
    top_p: float = 1.0,
    top_k: int = 0,
    batch_size: int = 16,
) -> list[float | None]:
    """Each valid task's probability that one solver attempt (``engine``'s model, sampled at these settings) starts
    with the domain's answer text and does not extend it; None where the domain has no answer text.

    ``engine`` is a local engine holding ``model`` and ``tokenizer`` (the HF engine); prompts are encoded as it
    encodes them for sampling, so the probabilities are those of the tokens it would sample.
    """
    model, tokenizer = engine.model, engine.tokenizer
    answers = [domain.answer_text(t) for t in tasks]
    rows = [
        (i, engine.encode_prompt(domain.solver_prompt(t)), tokenizer(a.prefix, add_special_tokens=False)["input_ids"])
        for i, (t, a) in enumerate(zip(tasks, answers, strict=True))
        if a is not None
    ]
    out: list[float | None] = [None] * len(tasks)
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        seqs = [prompt + answer for _, prompt, answer in chunk]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for r, s in enumerate(seqs):
            ids[r, : len(s)] = torch.tensor(s)
            attn[r, : len(s)] = 1
        logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits.float().cpu()
        for r, (i, prompt, answer) in enumerate(chunk):
            positions = torch.arange(len(prompt) - 1, len(prompt) + len(answer))  # predict answer, then the next
            warped = warp_logits(logits[r, positions], temperature=temperature, top_k=top_k, top_p=top_p)
            logp = torch.log_softmax(warped, dim=-1)
            answer_logp = float(logp[torch.arange(len(answer)), torch.tensor(answer)].sum())
            p_end = float(logp[-1].exp()[~_extends_mask(tokenizer, answers[i].extends, logp.shape[-1])].sum())
            out[i] = math.exp(answer_logp) * min(p_end, 1.0)
    model.train(was_training)
    return out
