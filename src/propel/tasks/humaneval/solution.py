"""A single-turn completion -> the ``solution.py`` it proposes.

The last fenced code block (```python or bare ```), else the whole completion. When it defines the entry point it
replaces the prompt's stub (the prompt is kept above it, so helpers and imports the prompt defines stay); otherwise it
is taken as the function's body and indented under the prompt's signature. A ``from __future__`` import must be a
module's first statement, so the ones the answer (or the prompt) starts with are found by parsing and moved to the
top of the composed file: an honest answer that starts with ``from __future__ import annotations`` runs as written.
"""

from __future__ import annotations

import ast
import re
import textwrap

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


def future_imports(code: str) -> tuple[list[str], str]:
    """``(imports, rest)``: the ``from __future__`` statements among ``code``'s leading statements (found by parsing,
    whatever their spelling: aliases, parentheses, several names, a docstring or comments before them) and the code
    without them. Code that does not parse is returned as it is."""
    try:
        tree = parse_python(textwrap.dedent(code))
    except SyntaxError:
        return [], code
    lines = code.splitlines(keepends=True)
    imports, drop = [], set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            imports.append(ast.unparse(node))
            drop.update(range(node.lineno - 1, node.end_lineno or node.lineno))
        elif not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            break  # future imports may follow only a docstring
    if not imports:
        return [], code
    return imports, "".join(line for i, line in enumerate(lines) if i not in drop)


def solution_source(prompt: str, completion: str, entry_point: str) -> str:
    """``solution.py`` from the task's prompt and the model's completion (future imports of either first)."""
    code = extract_code(completion).strip("\n")
    head, prompt = future_imports(prompt)
    mine, code = future_imports(code)
    top = "".join(f"{line}\n" for line in dict.fromkeys([*head, *mine]))
    code = code.strip("\n")
    if defines(code, entry_point):
        return top + prompt.rstrip("\n") + "\n    ...\n\n\n" + code + "\n"
    body = "".join(f"    {line}\n" if line.strip() else "\n" for line in code.splitlines())
    if code.startswith(("    ", "\t")):
        body = code + "\n"
    return top + prompt.rstrip("\n") + "\n" + body
