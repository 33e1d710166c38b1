"""Parse generator output for code tasks: a ```python block with ``f``, literal inputs, and a message.

Inputs are judged on the AST of ``f(<line>)``: the line must be positional arguments that are all literals, so
``1) + g(2`` or ``__import__('os')`` never becomes an input. Inputs are stored as the ``repr`` of the evaluated
argument tuple (canonical, and read back with ``ast.literal_eval`` in the sandbox).
"""

from __future__ import annotations

import ast
import re

from propel.python_ast import parse_python

_BLOCK = re.compile(r"```[ \t]*(\w*)[^\n]*\n(.*?)```", re.DOTALL)
_MESSAGE_LINE = re.compile(r"(?im)^\s*(?:message|hint)\s*:\s*(.+)$")


def blocks(text: str) -> list[tuple[str, str]]:
    """Fenced code blocks as (language tag lower-cased, body)."""
    return [(lang.lower(), body) for lang, body in _BLOCK.findall(text)]


def parse_input(line: str) -> str | None:
    """Canonical ``repr`` of the argument tuple written on ``line`` (e.g. ``'ab', [1, 2]``), or None if not literal."""
    line = line.strip()
    if not line or len(line) > 2000:
        return None
    try:
        node = parse_python(f"f({line})", "eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    if not isinstance(node, ast.Call) or node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
        return None
    if not node.args:
        return None
    try:
        args = tuple(ast.literal_eval(arg) for arg in node.args)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    text = repr(args)
    try:
        ast.literal_eval(text)  # must round-trip (``1e999`` becomes ``inf``, which does not)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return text


def python_code(text: str) -> str | None:
    """The last ```python block (or any block defining ``f``), for solver answers and generator functions."""
    found = [body for lang, body in blocks(text) if lang in ("python", "py")]
    if not found:
        found = [body for _, body in blocks(text) if "def " in body]
    return found[-1].strip() + "\n" if found else None


def parse_generation(text: str, n_inputs: int) -> dict | str:
    """``{"source", "inputs", "message"}`` from a generator completion, or a short failure reason."""
    source = python_code(text)
    if source is None:
        return "no_code_block"
    input_blocks = [body for lang, body in blocks(text) if lang in ("input", "inputs")]
    if not input_blocks:
        return "no_input_block"
    lines = (
        [b.strip() for b in input_blocks]
        if len(input_blocks) > 1
        else [ln for ln in input_blocks[0].splitlines() if ln.strip()]
    )
    inputs = [parse_input(line) for line in lines]
    if any(i is None for i in inputs):
        return "input_not_literal"
    if len(inputs) < n_inputs:
        return "too_few_inputs"
    inputs = inputs[:n_inputs]
    if len(set(inputs)) < len(inputs):
        return "duplicate_inputs"
    message_blocks = [body.strip() for lang, body in blocks(text) if lang == "message"]
    match = _MESSAGE_LINE.search(_BLOCK.sub("", text))
    message = message_blocks[-1] if message_blocks else (match.group(1).strip() if match else "")
    if not message:
        return "no_message"
    return {"source": source, "inputs": inputs, "message": message[:1000]}
