"""Activation checkpointing (``propel.models.checkpointing``): the same loss and gradients, fewer saved activations,
and it acts in eval mode (where propel's trainers run every forward), not only in training mode."""

from __future__ import annotations

import torch

from propel.losses.logprobs import token_logprobs
from propel.models import apply_lora
from propel.models.checkpointing import decoder_layers, enable_activation_checkpointing
from propel.models.span_logits import span_logits


def _policy(tiny_model, checkpointed: bool):
    model, _ = tiny_model
    torch.manual_seed(0)  # the same LoRA A init in both models
    policy = apply_lora(model)
    if checkpointed:
        assert enable_activation_checkpointing(policy) == 2
        assert enable_activation_checkpointing(policy) == 2  # idempotent: wrapped once
    return policy.eval()


def _loss_and_grads(policy, saved: list[int]):
    torch.manual_seed(0)
    ids = torch.randint(5, 1000, (3, 40))
    attn = torch.ones_like(ids)
    attn[1, -7:] = 0  # a right-padded row
    starts = torch.tensor([30, 25, 32])

    def count(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(count, lambda t: t):
        logits = span_logits(policy, ids, attn, starts, 8)
        logp, _ = token_logprobs(logits, ids[:, 32:40])
        loss = -logp.sum()
    loss.backward()
    grads = {n: p.grad.clone() for n, p in policy.named_parameters() if p.grad is not None}
    return float(loss.detach()), grads


def test_checkpointing_keeps_loss_and_gradients_and_saves_less(tiny_model_dir):
    from propel.models import load_model

    results = {}
    for checkpointed in (False, True):
        policy = _policy(load_model(str(tiny_model_dir)), checkpointed)
        saved: list[int] = []
        results[checkpointed] = (*_loss_and_grads(policy, saved), sum(saved))
    (loss, grads, plain), (loss_c, grads_c, saved_c) = results[False], results[True]
    assert abs(loss - loss_c) <= 1e-6 * abs(loss)
    assert grads.keys() == grads_c.keys() and any("lora_B" in n for n in grads)
    for name, g in grads.items():
        torch.testing.assert_close(grads_c[name], g, rtol=1e-6, atol=1e-8)
    assert saved_c < plain  # the layers' insides are recomputed, not kept (weights are counted in both)


def test_checkpointing_is_the_plain_forward_without_grad(tiny_model_dir):
    from propel.models import load_model

    policy = _policy(load_model(str(tiny_model_dir)), checkpointed=True)
    assert all(getattr(layer, "_propel_checkpointed", False) for layer in decoder_layers(policy))
    ids = torch.randint(5, 1000, (2, 12))
    with torch.no_grad():
        out = policy(input_ids=ids, use_cache=True)  # generation's path: a KV cache is filled, no recompute
    assert out.past_key_values is not None and out.past_key_values.get_seq_length() == 12
