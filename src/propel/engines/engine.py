"""The rollout-engine interface shared by GRPO rollouts, labeling and evaluation."""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from propel.records import Prompt


@dataclass
class SamplingSpec:
    """Sampling parameters, engine-independent."""

    n: int = 1
    """Samples per prompt."""
    max_new_tokens: int = 128
    temperature: float = 1.0
    """0 means greedy."""
    top_p: float = 1.0
    top_k: int = 0
    """0 disables top-k."""
    stop: list[str] = field(default_factory=list)
    """Stop strings; the returned text ends before the first one."""
    logprobs: bool = False
    """Return per-token logprobs of the sampled tokens (under the sampling distribution)."""


def chat_text(tokenizer, messages: Sequence[dict]) -> str:
    """Chat messages as the model reads them: the template with the assistant's turn opened, or, when the last
    message is the assistant's (a forced answer prefix), that message left open so generation continues it."""
    if messages and messages[-1].get("role") == "assistant":
        return tokenizer.apply_chat_template(list(messages), tokenize=False, continue_final_message=True)
    return tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)


@dataclass
class Completion:
    """One sampled completion."""

    text: str
    token_ids: list[int]
    logprobs: list[float] | None = None
    finish_reason: str = "length"  # "stop" | "length"


def eos_token_ids(tokenizer, generation_config=None) -> frozenset[int]:
    """The end-of-sequence ids generation stops on: the tokenizer's EOS and every id of ``generation_config``'s
    ``eos_token_id`` (an int or a list: Llama-3.1 lists ``<|eom_id|>`` and ``<|eot_id|>``, Qwen ``<|endoftext|>``
    next to ``<|im_end|>``)."""
    ids = {tokenizer.eos_token_id} if getattr(tokenizer, "eos_token_id", None) is not None else set()
    eos = getattr(generation_config, "eos_token_id", None)
    if eos is not None:
        ids.update(int(i) for i in (eos if isinstance(eos, (list, tuple)) else [eos]))
    return frozenset(ids)


def folder_generation_config(path: str | None):
    """The ``generation_config.json`` of a local model folder (what vLLM stops on by default), or None."""
    if not path or not os.path.isfile(os.path.join(path, "generation_config.json")):
        return None
    from transformers import GenerationConfig

    return GenerationConfig.from_pretrained(path)


class Engine(ABC):
    """Generates completions; ``update_weights`` syncs it to the current policy.

    Subclasses set ``tokenizer`` (an HF tokenizer): ``render`` and ``encode_prompt`` read it, so every engine feeds
    the model the same token ids for the same prompt.
    """

    tokenizer = None

    def context_length(self) -> int | None:
        """Most tokens (prompt + completion) one sequence may hold; None when the engine sets no limit."""
        return None

    @abstractmethod
    def generate(self, prompts: Sequence[Prompt], sampling: SamplingSpec) -> list[list[Completion]]:
        """``sampling.n`` completions for each prompt, in prompt order."""

    def render(self, prompt: Prompt) -> str:
        """The exact text fed to the model (chat template applied for chat prompts)."""
        if prompt.token_ids is not None:
            return self.tokenizer.decode(prompt.token_ids, skip_special_tokens=False)
        if prompt.messages is None:
            return prompt.text
        return chat_text(self.tokenizer, prompt.messages)

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """Token ids fed to the model (chat templates carry their own special tokens, so none are added to them)."""
        if prompt.token_ids is not None:
            return list(prompt.token_ids)
        return self.tokenizer(self.render(prompt), add_special_tokens=prompt.messages is None)["input_ids"]

    def eos_ids(self) -> frozenset[int]:
        """The ids that end a completion (``finish_reason="stop"``): the one set an episode strips from a turn's
        message and takes as the turn's closing. By default the tokenizer's EOS and the ids of the
        ``generation_config.json`` next to it (what vLLM stops on); an engine that knows its model's config says so."""
        return eos_token_ids(self.tokenizer, folder_generation_config(getattr(self.tokenizer, "name_or_path", None)))

    def update_weights(self, policy) -> None:  # noqa: B027 - optional hook
        """Make later generations follow ``policy``'s current weights."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""
