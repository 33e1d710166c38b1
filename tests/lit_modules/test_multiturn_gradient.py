"""Multi-turn loss: prompt and tool-output tokens get no gradient, and a tool output changes the loss only through
the context it gives later assistant turns (tiny random model, real forward and backward)."""

from __future__ import annotations

import torch

from propel.losses.logprobs import token_logprobs
from propel.losses.policy_gradient import LossSpec, policy_loss
from propel.records import Sample, Turn
from propel.rollouts import pack


def _sample(obs1: list[int], obs2: list[int]) -> Sample:
    turns = [
        Turn("assistant", "a1", [11, 12, 13]),
        Turn("tool", "o1", obs1, trainable=False),
        Turn("assistant", "a2", [21, 22]),
        Turn("tool", "o2", obs2, trainable=False),
    ]
    return Sample("p", "c", prompt_ids=[1, 5, 6, 7], turns=turns)


def _loss_and_grads(model, sample: Sample):
    model.zero_grad(set_to_none=True)
    batch = pack([sample], torch.tensor([1.0]), pad_id=0)
    start = int(batch.starts[0])
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    picked = logits[:, start - 1 : start - 1 + batch.response_ids.shape[1]]
    logp, _ = token_logprobs(picked, batch.response_ids)
    logp.retain_grad()
    out = policy_loss(logp, logp.detach() - 0.05, torch.tensor([1.0]), batch.loss_mask, LossSpec("dapo", beta=0.0))
    out.loss.backward()
    params = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return out.loss.detach(), logp.detach(), logp.grad.detach(), batch.loss_mask, params


def test_tool_tokens_get_no_gradient_and_act_only_through_context(tiny_model):
    tiny_model, _ = tiny_model
    torch.manual_seed(0)
    tiny_model.train(False)
    base = _loss_and_grads(tiny_model, _sample([31, 32, 33, 34], [41, 42]))
    loss, logp, grad, mask, params = base
    assert torch.all(grad[mask == 0] == 0) and torch.all(grad[mask == 1] != 0)

    # the last tool output precedes no assistant token: changing it changes nothing at all
    last = _loss_and_grads(tiny_model, _sample([31, 32, 33, 34], [99, 98]))
    assert torch.equal(last[0], loss)
    assert all(torch.allclose(last[4][n], g, atol=1e-7, rtol=0) for n, g in params.items())

    # a middle tool output is context for the second assistant turn only
    middle = _loss_and_grads(tiny_model, _sample([77, 78, 79, 80], [41, 42]))
    first_turn, second_turn = slice(0, 3), slice(7, 9)
    assert torch.allclose(middle[1][0, first_turn], logp[0, first_turn], atol=1e-6)
    assert not torch.allclose(middle[1][0, second_turn], logp[0, second_turn], atol=1e-4)
    assert torch.all(middle[2][mask == 0] == 0)
