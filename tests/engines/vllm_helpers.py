"""Shared pieces of the vLLM engine tests: prompts, HF references and a deterministic 'optimizer step' on LoRA."""

from __future__ import annotations

import torch

from propel.records import Prompt

CHAT = Prompt(messages=[{"role": "user", "content": "What is the capital of France?"}])
RAW = Prompt(text="Problem: Tom has 3 apples and buys 4 more. How many apples does he have?\nAnswer:")
PROMPTS = [CHAT, RAW]


def perturb_lora(policy, seed: int, std: float = 0.02) -> None:
    """Stand-in for an optimizer step: give every ``lora_B`` seeded random values (peft initialises them to 0)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, param in policy.named_parameters():
            if "lora_B" in name:
                param.copy_(torch.randn(param.shape, generator=gen) * std)


def common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the shared leading run of two token lists."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def assert_follows(want, got, atol: float = 5e-3) -> None:
    """Greedy outputs ``got`` (engine) follow ``want`` (HF on the same weights): a long shared token prefix with the
    same logprobs (fp32 both; kernels differ, so a near-tie may flip a late token)."""
    import torch

    for w, g in zip(want, got, strict=True):
        w, g = w[0], g[0]
        shared = common_prefix(w.token_ids, g.token_ids)
        assert shared >= min(16, len(w.token_ids)), (w.text, g.text)
        torch.testing.assert_close(
            torch.tensor(g.logprobs[:shared]), torch.tensor(w.logprobs[:shared]), atol=atol, rtol=0
        )
