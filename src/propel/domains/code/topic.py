"""A coarse topic label for a code task, read off the AST of ``f`` (for top-topic diversity)."""

from __future__ import annotations

import ast

from propel.python_ast import parse_python

_STRING_METHODS = {"upper", "lower", "split", "join", "replace", "strip", "startswith", "endswith", "find", "isdigit"}
_DICT_METHODS = {"items", "keys", "values", "get", "setdefault"}


def code_topic(source: str, func_name: str = "f") -> str:
    """One of recursion, sorting_order, string, dict, set, math, list, other (first match in that order)."""
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return "other"
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    calls = {n.func.id for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    methods = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    if any(
        func.name in {c.func.id for c in ast.walk(func) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
        for func in funcs
    ):
        return "recursion"
    if {"sorted", "min", "max", "reversed"} & calls or {"sort", "reverse"} & methods:
        return "sorting_order"
    strings = any(isinstance(n, ast.Constant) and isinstance(n.value, str) for n in ast.walk(tree))
    if _STRING_METHODS & methods or {"ord", "chr", "str"} & calls or strings:
        return "string"
    if (
        _DICT_METHODS & methods
        or "dict" in calls
        or any(isinstance(n, (ast.Dict, ast.DictComp)) for n in ast.walk(tree))
    ):
        return "dict"
    if "set" in calls or any(isinstance(n, (ast.Set, ast.SetComp)) for n in ast.walk(tree)):
        return "set"
    if any(isinstance(n, (ast.List, ast.ListComp)) for n in ast.walk(tree)) or {"append", "extend", "pop"} & methods:
        return "list"
    if "math" in names or any(isinstance(n, ast.BinOp) for n in ast.walk(tree)):
        return "math"
    return "other"
