"""The rollout-engine interface shared by GRPO rollouts, labeling and evaluation."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field


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


@dataclass
class Prompt:
    """A prompt: raw text (completion), chat messages (rendered with the tokenizer's chat template), or token ids.

    ``token_ids`` is "token in, token out": a multi-turn episode continues from the exact ids it has so far, so
    earlier turns are never re-tokenized.
    """

    text: str | None = None
    messages: list[dict[str, str]] | None = None
    token_ids: list[int] | None = None

    def __post_init__(self) -> None:
        if sum(x is not None for x in (self.text, self.messages, self.token_ids)) != 1:
            raise ValueError("a Prompt needs exactly one of `text`, `messages` or `token_ids`")


@dataclass
class Completion:
    """One sampled completion."""

    text: str
    token_ids: list[int]
    logprobs: list[float] | None = None
    finish_reason: str = "length"  # "stop" | "length"


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
        return self.tokenizer.apply_chat_template(prompt.messages, tokenize=False, add_generation_prompt=True)

    def encode_prompt(self, prompt: Prompt) -> list[int]:
        """Token ids fed to the model (chat templates carry their own special tokens, so none are added to them)."""
        if prompt.token_ids is not None:
            return list(prompt.token_ids)
        return self.tokenizer(self.render(prompt), add_special_tokens=prompt.messages is None)["input_ids"]

    def update_weights(self, policy) -> None:  # noqa: B027 - optional hook
        """Make later generations follow ``policy``'s current weights."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources."""
