"""Token ids of a chat built turn by turn, never re-tokenized ("token in, token out").

Generated ids are appended exactly as the engine produced them. An environment message is appended as the chat
template renders it: the template is applied to the whole conversation and the text it adds after what is already
there (closing the assistant turn, the tool message, the next assistant header) is tokenized alone. Every boundary
in ChatML-style templates is a special token, so that delta tokenizes as it would inside the whole text; a template
that rewrites earlier turns (one stripping past reasoning) breaks the prefix and raises ``TemplateNotAppendOnly``,
naming the first differing character, instead of silently training on text the model never saw. The caller may
then ``restart`` from the template's fresh rendering (the episode runner's step-wise fallback).
"""

from __future__ import annotations

from typing import Any

from propel.engines.tool_calls import describe_tools


class TemplateNotAppendOnly(RuntimeError):
    """The chat template re-rendered an earlier turn differently: incremental token ids would not match it."""


def template_renders_tools(tokenizer, tools: list[dict[str, Any]]) -> bool:
    """Whether the tokenizer's chat template describes ``tools=`` to the model (SmolLM2's ChatML does not)."""
    if not tools:
        return False
    probe = [{"role": "user", "content": "hi"}]
    try:
        with_tools = tokenizer.apply_chat_template(probe, tools=tools, tokenize=False)
    except Exception:  # noqa: BLE001 - a template that rejects tools= does not support them
        return False
    return with_tools != tokenizer.apply_chat_template(probe, tokenize=False)


def with_tool_block(messages: list[dict[str, str]], tools: list[dict[str, Any]]) -> list[dict[str, str]]:
    """``messages`` with the plain-text tool description at the end of the system message (one added if none)."""
    block = describe_tools(tools)
    if messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": f"{messages[0]['content']}\n\n{block}"}, *messages[1:]]
    return [{"role": "system", "content": block}, *messages]


class Conversation:
    """The messages of one episode and the exact token ids the model has seen and produced.

    Args:
        tokenizer: the engine's tokenizer (its chat template renders the messages).
        messages: the opening messages (system, user).
        tools: JSON tool schemas; given to the template when it renders them, else described in the system message.
    """

    def __init__(self, tokenizer, messages: list[dict[str, str]], tools: list[dict[str, Any]] | None = None) -> None:
        self.tokenizer = tokenizer
        tools = list(tools or [])
        self.template_tools = tools if template_renders_tools(tokenizer, tools) else None
        self.messages = list(messages) if (self.template_tools or not tools) else with_tool_block(messages, tools)
        self.text = self._render(add_generation_prompt=True)
        self.ids: list[int] = self._encode(self.text)
        self.prompt_length = len(self.ids)
        self._closed_by: frozenset[int] | None = None
        """The EOS set, while the last assistant turn ended with one of its ids (until the next message)."""

    def _render(self, add_generation_prompt: bool) -> str:
        kwargs = {"tools": self.template_tools} if self.template_tools else {}
        return self.tokenizer.apply_chat_template(
            self.messages, tokenize=False, add_generation_prompt=add_generation_prompt, **kwargs
        )

    def _encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def add_assistant(self, token_ids: list[int], eos_ids: set[int] | frozenset[int]) -> str:
        """Append a generated turn as is; returns its message content (the text without a final end-of-turn token).

        A turn that ends with an id of ``eos_ids`` (the engine's whole EOS set, which may hold several: Qwen's
        ``<|endoftext|>`` next to ``<|im_end|>``) is closed by that id: the next message's delta leaves out the
        template's own closing token, so a turn is never terminated twice."""
        closed = bool(token_ids) and token_ids[-1] in eos_ids
        content = self._decode(token_ids[:-1] if closed else token_ids)
        self.ids.extend(token_ids)
        self.text += content if closed else self._decode(token_ids)
        self._closed_by = frozenset(eos_ids) if closed else None
        self.messages.append({"role": "assistant", "content": content})
        return content

    def render_message(self, role: str, content: str) -> tuple[str, list[int]]:
        """What appending an environment message would do, without doing it: the conversation's new text (with the
        next assistant header) and the ids it adds (the template's closing of the previous assistant turn
        included). Pass the result to ``add_message`` to append it without rendering again."""
        self.messages.append({"role": role, "content": content})
        try:
            full = self._render(add_generation_prompt=True)
        finally:
            self.messages.pop()
        if not full.startswith(self.text):
            at = next((i for i, (a, b) in enumerate(zip(full, self.text, strict=False)) if a != b), len(self.text))
            raise TemplateNotAppendOnly(
                f"the chat template re-renders earlier turns differently at character {at} "
                f"({self.text[at : at + 40]!r} became {full[at : at + 40]!r}); incremental token ids would not match"
            )
        delta = self._encode(full[len(self.text) :])
        if self._closed_by is not None and delta and delta[0] in self._closed_by:
            delta = delta[1:]  # the template's end-of-turn token: the generated one already closed the turn
        return full, delta

    def restart(self, role: str, content: str) -> list[int]:
        """Append an environment message and re-tokenize the whole conversation as the template now renders it
        (for templates that are not append-only); returns the new ids, from which the next turn is generated."""
        self.messages.append({"role": role, "content": content})
        self.text = self._render(add_generation_prompt=True)
        self.ids = self._encode(self.text)
        self._closed_by = None
        return self.ids

    def add_message(self, role: str, content: str, rendered: tuple[str, list[int]] | None = None) -> list[int]:
        """Append an environment message as the template renders it (``rendered``: ``render_message``'s result for
        this message, if already computed); returns the appended ids."""
        full, delta = rendered or self.render_message(role, content)
        self.messages.append({"role": role, "content": content})
        self.ids.extend(delta)
        self.text = full
        self._closed_by = None
        return delta
