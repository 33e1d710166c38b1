"""Tool calls in text: the Hermes/Qwen convention ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``.

Chat templates with tool support (Qwen2.5, Hermes, Llama 3.1) describe ``tools=`` to the model themselves and their
models answer in this form. Templates that ignore ``tools=`` (SmolLM2's plain ChatML) get ``describe_tools``'s
plain-text block in the system message instead: the same JSON schemas and the same call syntax, so one parser serves
both. Parsing is lenient where small models slip (raw newlines inside JSON strings, a missing closing tag at the end
of a turn) and never raises: a malformed call comes back as a ``ToolCallError`` whose reason the model is shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple

OPEN, CLOSE = "<tool_call>", "</tool_call>"
_JSON_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "object": dict, "array": list}


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)


class ToolCallError(NamedTuple):
    """Why an assistant turn holds no usable tool call (shown to the model, counted in the tool error rate)."""

    reason: str


def function_tool(name: str, description: str, **params: str) -> dict[str, Any]:
    """A tool schema in the chat-template format; ``params`` maps each (required, string) argument to its meaning."""
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {k: {"type": "string", "description": v} for k, v in params.items()},
                "required": list(params),
            },
        },
    }


def describe_tools(tools: list[dict[str, Any]]) -> str:
    """The plain-text tool block for templates that ignore ``tools=``: each schema and the call syntax."""
    lines = [
        "You can use tools. To call one, write exactly one tool call and stop:",
        f'{OPEN}{{"name": "<tool name>", "arguments": {{<arguments as JSON>}}}}{CLOSE}',
        "The result comes back in the next message. Tools:",
    ]
    for tool in tools:
        fn = tool["function"]
        args = ", ".join(f"{k}: {v.get('type', 'string')}" for k, v in fn["parameters"].get("properties", {}).items())
        lines.append(f"- {fn['name']}({args}): {fn['description']}")
    return "\n".join(lines)


def format_tool_call(call: ToolCall) -> str:
    """The text of a well-formed call (what a scripted policy or a demonstration writes)."""
    return f"{OPEN}{json.dumps({'name': call.name, 'arguments': call.arguments})}{CLOSE}"


def parse_tool_call(text: str) -> ToolCall | ToolCallError:
    """The first tool call in an assistant turn, or why there is none usable (``no_tool_call``, ``bad_json``, ...)."""
    start = text.find(OPEN)
    if start < 0:
        return ToolCallError(f'no_tool_call: write a call as {OPEN}{{"name": ..., "arguments": {{...}}}}{CLOSE}')
    body = text[start + len(OPEN) :]
    end = body.find(CLOSE)
    body = (body if end < 0 else body[:end]).strip()
    try:
        payload = json.loads(body, strict=False)  # strict=False: raw newlines inside strings are accepted
    except json.JSONDecodeError as e:
        return ToolCallError(f"bad_json: {e.msg} at char {e.pos}")
    if not isinstance(payload, dict) or not isinstance(payload.get("name"), str):
        return ToolCallError('bad_call: expected {"name": "<tool>", "arguments": {...}}')
    arguments = payload.get("arguments", payload.get("parameters", {}))
    if isinstance(arguments, str):  # some models double-encode the arguments
        try:
            arguments = json.loads(arguments, strict=False)
        except json.JSONDecodeError:
            return ToolCallError("bad_arguments: arguments must be a JSON object")
    if not isinstance(arguments, dict):
        return ToolCallError("bad_arguments: arguments must be a JSON object")
    return ToolCall(payload["name"], arguments)


def check_arguments(call: ToolCall, tools: list[dict[str, Any]]) -> str | None:
    """Why ``call`` does not fit its tool's schema (unknown tool, missing or mistyped argument), or None."""
    schemas = {t["function"]["name"]: t["function"] for t in tools}
    if call.name not in schemas:
        return f"unknown_tool: {call.name!r}; tools are {', '.join(sorted(schemas))}"
    params = schemas[call.name].get("parameters", {})
    for name in params.get("required", []):
        if name not in call.arguments:
            return f"bad_arguments: {call.name} needs {name!r}"
    for name, value in call.arguments.items():
        spec = params.get("properties", {}).get(name)
        if spec is None:
            return f"bad_arguments: {call.name} has no argument {name!r}"
        expected = _JSON_TYPES.get(spec.get("type", "string"), object)
        if not isinstance(value, expected):
            return f"bad_arguments: {call.name}.{name} must be a {spec.get('type', 'string')}"
        if isinstance(value, str) and "\x00" in value:  # no command line or file name can hold one
            return f"bad_arguments: {call.name}.{name} contains a NUL byte"
    return None
