"""Static checks on model-written Python: an import allowlist and no dynamic-import / reflection escapes.

The check is on the AST, never on text: ``import os.path`` is judged by its root package ``os`` (AZR compared
dotted names against path components and let ``os`` through), and ``__import__``, ``importlib``, ``eval`` and
dunder access are refused however they are spelled. The sandbox is the second line of defence, not the first.
"""

from __future__ import annotations

import ast
import re

from propel.python_ast import parse_python

ALLOWED_MODULES: frozenset[str] = frozenset(
    {
        "math",
        "cmath",
        "itertools",
        "functools",
        "collections",
        "string",
        "re",
        "heapq",
        "bisect",
        "operator",
        "fractions",
        "decimal",
        "statistics",
        "typing",
        "dataclasses",
        "copy",
        "numbers",
        "enum",
    }
)
"""Root packages that task code may import; everything else (os, sys, subprocess, random, time, ...) is refused."""

BANNED_NAMES: frozenset[str] = frozenset(
    {
        "__import__",
        "eval",
        "exec",
        "compile",
        "open",
        "input",
        "globals",
        "locals",
        "vars",
        "setattr",
        "delattr",
        "breakpoint",
        "exit",
        "quit",
        "help",
        "memoryview",
        "importlib",
        "id",
        "hash",
    }
)
"""Builtins that load code, touch the file system, reflect on frames, or make outputs process-dependent."""

_DUNDER = re.compile(r"__\w+__")
_ALLOWED_TOP_LEVEL = (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)


def _root(module: str) -> str:
    return module.split(".")[0]


def check_source(source: str, func_name: str = "f", max_chars: int = 8000) -> str | None:
    """Return ``None`` when ``source`` is acceptable task code defining ``func_name``, else a short reason."""
    if len(source) > max_chars:
        return "source_too_long"
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return "syntax_error"
    defines = False
    for stmt in tree.body:
        is_docstring = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
        if not isinstance(stmt, _ALLOWED_TOP_LEVEL) and not is_docstring:
            return "top_level_statement"
        if isinstance(stmt, ast.FunctionDef) and stmt.name == func_name:
            defines = True
    if not defines:
        return f"no_function_{func_name}"
    for node in ast.walk(tree):
        reason = _check_node(node)
        if reason:
            return reason
    return None


def _check_node(node: ast.AST) -> str | None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if _root(alias.name) not in ALLOWED_MODULES:
                return f"banned_import:{alias.name}"
    elif isinstance(node, ast.ImportFrom):
        if node.level or not node.module or _root(node.module) not in ALLOWED_MODULES:
            return f"banned_import:{node.module or '.'}"
    elif isinstance(node, ast.Name):
        if node.id in BANNED_NAMES:
            return f"banned_call:{node.id}"
        if _DUNDER.fullmatch(node.id):
            return f"dunder:{node.id}"
    elif isinstance(node, ast.Attribute):
        if _DUNDER.fullmatch(node.attr):
            return f"dunder:{node.attr}"
        if node.attr in {"system", "popen", "import_module", "__import__", "f_globals", "f_back", "gi_frame"}:
            return f"banned_call:{node.attr}"
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in {"getattr", "hasattr"}:
        name = node.args[1] if len(node.args) > 1 else None
        if not (isinstance(name, ast.Constant) and isinstance(name.value, str) and not name.value.startswith("_")):
            return "dynamic_getattr"
    elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _DUNDER.search(node.value):
        return "dunder_string"
    elif isinstance(node, (ast.AsyncFunctionDef, ast.Await)):
        return f"banned_syntax:{type(node).__name__}"
    return None
