"""What a model is asked: raw text, chat messages or token ids (exactly one). A record every floor may pass, so it
lives below the engines that render it."""

from __future__ import annotations

from dataclasses import dataclass


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
