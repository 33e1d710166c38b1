"""Token-exact conversations: the incremental ids equal the chat template's encoding of the whole conversation."""

from __future__ import annotations

import copy

import pytest

from propel.engines.tool_calls import ToolCall, format_tool_call
from propel.envs.tool_env import TOOLS
from propel.rollouts.conversation import Conversation, TemplateNotAppendOnly, template_renders_tools

OPENING = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "Make a.txt say hi."}]


def _encode_all(tok, messages, **kw):
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, **kw)
    return tok(text, add_special_tokens=False)["input_ids"]


def test_smollm2_ignores_tools_so_they_go_in_the_system_message(tokenizer):
    assert not template_renders_tools(tokenizer, TOOLS)
    conv = Conversation(tokenizer, OPENING, TOOLS)
    assert "write_file(path: string, content: string)" in conv.messages[0]["content"]
    assert conv.ids == _encode_all(tokenizer, conv.messages) and conv.prompt_length == len(conv.ids)


def test_every_turn_extends_the_ids_exactly(tokenizer):
    """After each turn, the ids equal a fresh encoding of the whole conversation (SmolLM2's ChatML is append-only);
    generated ids are kept as generated, whether the turn ended on a stop string or on the end-of-turn token."""
    conv = Conversation(tokenizer, OPENING, TOOLS)
    eos = {tokenizer.eos_token_id}
    call = format_tool_call(ToolCall("bash", {"command": "echo hi > a.txt"}))
    generated = tokenizer(call, add_special_tokens=False)["input_ids"]  # stopped on </tool_call>: no end token
    content = conv.add_assistant(generated, eos)
    assert content == call
    assert conv.ids == _encode_all(tokenizer, conv.messages)[: len(conv.ids)]
    appended = conv.add_message("tool", "[exit code 0]\n")
    assert appended[0] == tokenizer.eos_token_id  # the template's closing of the assistant turn is env-side
    assert conv.ids == _encode_all(tokenizer, conv.messages)
    second = tokenizer("Done.", add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]  # ended by EOS
    assert conv.add_assistant(second, eos) == "Done."
    peeked = len(conv.render_message("user", "Are you sure?\nyes")[1])
    appended = conv.add_message("user", "Are you sure?\nyes")
    assert appended[0] != tokenizer.eos_token_id  # the model's own end token is not added twice
    assert conv.ids == _encode_all(tokenizer, conv.messages) and peeked == len(appended)


def test_a_template_that_rewrites_history_is_refused(tokenizer):
    """A template that drops earlier assistant turns (as reasoning-stripping templates do) breaks the prefix."""
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = (
        "{% for m in messages %}{% if m['role'] != 'assistant' or loop.last %}"
        "{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}"
    )
    conv = Conversation(tok, OPENING)
    conv.add_assistant(tok("thinking", add_special_tokens=False)["input_ids"] + [tok.eos_token_id], {tok.eos_token_id})
    before = list(conv.ids)
    with pytest.raises(TemplateNotAppendOnly, match="re-renders earlier turns"):
        conv.add_message("tool", "ok")  # now the assistant turn is not the last: the template drops it
    assert conv.ids == before and conv.messages[-1]["role"] == "assistant"  # nothing half-appended


def test_a_template_with_tool_support_renders_the_tools_itself(tokenizer):
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = (
        "{% if tools %}<|im_start|>system\nTools: {{ tools | map(attribute='function.name') | join(', ') }}"
        "<|im_end|>\n{% endif %}{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + "
        "'<|im_end|>\n'}}{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}"
    )
    assert template_renders_tools(tok, TOOLS)
    conv = Conversation(tok, OPENING, TOOLS)
    assert conv.messages == OPENING and "Tools: bash, read_file, write_file, submit" in conv.text
    assert conv.ids == _encode_all(tok, OPENING, tools=TOOLS)


def test_a_non_canonical_split_is_kept_as_generated(tokenizer):
    """A sampler may split a word into sub-tokens the tokenizer would merge: the conversation keeps those ids, and
    the next message's delta follows them."""
    from propel.engines.engine import SamplingSpec
    from propel.engines.scripted import ScriptedEngine

    conv = Conversation(tokenizer, OPENING, TOOLS)
    call = format_tool_call(ToolCall("bash", {"command": "echo hello > a.txt"}))
    split = ScriptedEngine(tokenizer, str, split_tokens=True)._completion(call, SamplingSpec(max_new_tokens=500))
    assert split.token_ids != tokenizer(call, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    before = list(conv.ids)
    assert conv.add_assistant(split.token_ids, {tokenizer.eos_token_id}) == call
    appended = conv.add_message("tool", "[exit code 0]\n")
    assert conv.ids == before + split.token_ids + appended
    assert tokenizer.decode(conv.ids) == tokenizer.decode(_encode_all(tokenizer, conv.messages))
