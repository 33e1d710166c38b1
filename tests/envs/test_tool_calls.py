"""Tool calls in text: well-formed calls parse; every malformed shape comes back as a reason, never an exception."""

from __future__ import annotations

import pytest

from propel.engines.tool_calls import (
    ToolCall,
    ToolCallError,
    check_arguments,
    describe_tools,
    format_tool_call,
    parse_tool_call,
)
from propel.envs.tool_env import TOOLS


def test_a_formatted_call_parses_back():
    call = ToolCall("write_file", {"path": "a.txt", "content": 'line "1"\nline 2'})
    assert parse_tool_call("thinking...\n" + format_tool_call(call) + "\ntrailing") == call


def test_lenient_where_small_models_slip():
    raw_newline = '<tool_call>{"name": "bash", "arguments": {"command": "echo a\necho b"}}'  # no closing tag
    assert parse_tool_call(raw_newline) == ToolCall("bash", {"command": "echo a\necho b"})
    double_encoded = '<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"ls\\"}"}</tool_call>'
    assert parse_tool_call(double_encoded) == ToolCall("bash", {"command": "ls"})


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I will just answer: 42", "no_tool_call"),
        ("<tool_call>{name: bash}</tool_call>", "bad_json"),
        ('<tool_call>["bash"]</tool_call>', "bad_call"),
        ('<tool_call>{"name": "bash", "arguments": [1]}</tool_call>', "bad_arguments"),
        ('<tool_call>{"name": "bash", "arguments": "not json"}</tool_call>', "bad_arguments"),
    ],
)
def test_malformed_calls_are_reasons(text, reason):
    out = parse_tool_call(text)
    assert isinstance(out, ToolCallError) and out.reason.startswith(reason), out


@pytest.mark.parametrize(
    ("call", "reason"),
    [
        (ToolCall("rm_rf", {}), "unknown_tool"),
        (ToolCall("bash", {}), "bad_arguments: bash needs 'command'"),
        (ToolCall("bash", {"command": 3}), "bad_arguments: bash.command must be a string"),
        (ToolCall("read_file", {"path": "a", "mode": "r"}), "bad_arguments: read_file has no argument 'mode'"),
    ],
)
def test_arguments_are_checked_against_the_schema(call, reason):
    assert check_arguments(call, TOOLS).startswith(reason)
    assert check_arguments(ToolCall("bash", {"command": "ls"}), TOOLS) is None


def test_the_plain_text_block_names_every_tool_and_the_syntax():
    block = describe_tools(TOOLS)
    assert "<tool_call>" in block and "</tool_call>" in block
    for name in (
        "bash(command: string)",
        "read_file(path: string)",
        "write_file(path: string, content: string)",
        "submit()",
    ):
        assert name in block
