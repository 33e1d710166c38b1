"""Cheap numbers about a generated function and its outputs: the features a rival ranks code tasks by.

An activation probe earns its place only by ranking tasks better than these do (``propel.probes.rivals``).
"""

from __future__ import annotations

import ast
import json
import math

from propel.python_ast import parse_python

FEATURES = ("ast_nodes", "source_lines", "loops", "branches", "arguments", "distinct_outputs", "log_output_chars")


def code_features(source: str, inputs: list[str], outputs: list) -> dict[str, float]:
    """``FEATURES`` of one valid task (always the same keys, in that order)."""
    try:
        nodes = list(ast.walk(parse_python(source)))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        nodes = []
    distinct = {json.dumps(o, sort_keys=True) for o in outputs}
    arity = len(ast.literal_eval(inputs[0])) if inputs else 0
    return {
        "ast_nodes": float(len(nodes)),
        "source_lines": float(len([ln for ln in source.splitlines() if ln.strip()])),
        "loops": float(sum(isinstance(n, (ast.For, ast.While, ast.comprehension)) for n in nodes)),
        "branches": float(sum(isinstance(n, (ast.If, ast.IfExp)) for n in nodes)),
        "arguments": float(arity),
        "distinct_outputs": float(len(distinct)),
        "log_output_chars": math.log1p(sum(len(d) for d in distinct) / max(len(distinct), 1)),
    }
