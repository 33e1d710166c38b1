"""A shared prompt run once (``propel.models.prefix_sharing``): the span logits and the LoRA gradients are the plain
forward's, for groups, lone rows, right padding and spans past a row's end, and a trainer's update is the same."""

from __future__ import annotations

import torch

from propel.losses.logprobs import token_logprobs
from propel.models import apply_lora
from propel.models.prefix_sharing import prompt_groups, shared_prefix_span_logits
from propel.models.span_logits import span_logits


def _rows():
    """Two groups of three rows sharing a 20- and a 26-token prompt, a lone row, and a row whose prompt has padding."""
    torch.manual_seed(0)
    a, b = torch.randint(5, 1000, (20,)), torch.randint(5, 1000, (26,))
    ids = torch.randint(5, 1000, (8, 40))
    ids[[0, 2, 5], :20] = a
    ids[[1, 3, 4], :26] = b
    starts = torch.tensor([20, 26, 20, 26, 26, 20, 31, 18])
    attn = torch.ones_like(ids)
    attn[2, -9:] = 0  # right padding inside a group
    attn[4, -3:] = 0
    attn[7, 5] = 0  # a hole in the prompt: never shared
    return ids, attn, starts


def test_rows_are_grouped_only_by_identical_fully_attended_prompts():
    ids, attn, starts = _rows()
    assert prompt_groups(ids, attn, starts) == [[0, 2, 5], [1, 3, 4], [6], [7]]
    ids[5, 3] += 1  # one token differs: its own group
    assert prompt_groups(ids, attn, starts) == [[0, 2], [1, 3, 4], [5], [6], [7]]


def _logp_and_grads(policy, fn, length):
    ids, attn, starts = _rows()
    policy.zero_grad()
    logits = fn(policy, ids, attn, starts, length)
    index = (starts[:, None] + torch.arange(length)[None]).clamp(max=ids.shape[1] - 1)
    logp, _ = token_logprobs(logits, ids.gather(1, index))
    keep = (index < ids.shape[1]) & attn.gather(1, index).bool() & (starts[:, None] + torch.arange(length) < 40)
    (-(logp * keep).sum()).backward()
    grads = {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}
    return logp.detach(), keep, grads


def test_shared_prompts_give_the_plain_forwards_logprobs_and_gradients(tiny_model):
    model, _ = tiny_model
    torch.manual_seed(0)
    policy = apply_lora(model).eval()
    for p in policy.parameters():  # a nonzero LoRA B, so the adapter's gradients are not all zero
        if p.requires_grad:
            torch.nn.init.normal_(p, std=0.02)
    for length in (14, 25):  # inside every row, and past the end of the shorter-prompt rows
        plain, keep, g_plain = _logp_and_grads(policy, span_logits, length)
        shared, keep2, g_shared = _logp_and_grads(policy, shared_prefix_span_logits, length)
        assert torch.equal(keep, keep2)
        torch.testing.assert_close(shared[keep], plain[keep], rtol=0, atol=1e-5)
        assert g_plain.keys() == g_shared.keys() and g_plain
        for name in g_plain:  # float sums in another order: off by a share of the tensor's scale, not of each entry
            scale = g_plain[name].abs().max().item()  # (measured <= 3.5e-6 of it; a missed path is off by ~1 of it)
            torch.testing.assert_close(g_shared[name], g_plain[name], rtol=0, atol=1e-4 * scale)
        assert any(g.abs().sum() > 0 for g in g_plain.values())


def test_rows_without_a_shared_prompt_take_the_plain_forward_bit_for_bit(tiny_model):
    model, _ = tiny_model
    ids, attn, starts = _rows()
    lone = torch.tensor([0, 1, 6, 7])  # one row of each group: nothing to share
    with torch.no_grad():
        plain = span_logits(model, ids[lone], attn[lone], starts[lone], 9)
        shared = shared_prefix_span_logits(model, ids[lone], attn[lone], starts[lone], 9)
    assert torch.equal(plain, shared)


def test_a_model_that_returns_no_cache_scores_each_row_with_its_own_forward(tiny_model):
    model, _ = tiny_model
    ids, attn, starts = _rows()

    class NoCache(torch.nn.Module):
        """The tiny model, answering without a KV cache (as a model without transformers' cache classes does)."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, **kwargs):
            out = self.inner(**kwargs)
            out.past_key_values = None
            return out

    with torch.no_grad():
        plain = span_logits(model, ids, attn, starts, 9)
        shared = shared_prefix_span_logits(NoCache(model), ids, attn, starts, 9)
    torch.testing.assert_close(shared, plain, rtol=0, atol=1e-5)
