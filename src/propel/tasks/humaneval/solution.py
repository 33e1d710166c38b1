"""A single-turn completion -> the ``solution.py`` it proposes.

The last fenced code block (```python or bare ```), else the whole completion. When it defines the entry point it
replaces the prompt's stub (the prompt is kept above it, so helpers and imports the prompt defines stay); otherwise it
is taken as the function's body and indented under the prompt's signature.
"""

from __future__ import annotations

import ast
import re

from propel.python_ast import parse_python

_FENCE = re.compile(r"```[ \t]*(?:python3?|py)?[ \t]*\n(.*?)(?:```|\Z)", re.DOTALL | re.IGNORECASE)


def extract_code(completion: str) -> str:
    """The last fenced block's text, else the completion itself."""
    blocks = _FENCE.findall(completion)
    return blocks[-1] if blocks else completion


def defines(code: str, name: str) -> bool:
    try:
        tree = parse_python(code)
    except SyntaxError:
        return re.search(rf"^\s*def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None
    return any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name for n in ast.walk(tree))


def solution_source(prompt: str, completion: str, entry_point: str) -> str:
    """``solution.py`` from the task's prompt and the model's completion."""
    code = extract_code(completion).strip("\n")
    if defines(code, entry_point):
        return prompt.rstrip("\n") + "\n    ...\n\n\n" + code + "\n"
    body = "".join(f"    {line}\n" if line.strip() else "\n" for line in code.splitlines())
    if code.startswith(("    ", "\t")):
        body = code + "\n"
    return prompt.rstrip("\n") + "\n" + body
