"""Symbolic equivalence of final answers without ``eval``: LaTeX-ish text -> Python AST -> sympy, then a numeric check.

``sympy.parse_expr`` evaluates strings (unsafe on model output) and ``math-verify`` times out with ``signal.alarm``
(main thread only), so answers are converted node by node from a whitelisted AST, exponents are bounded, and
equivalence is decided numerically (at random points when symbols remain): bounded work, no hangs.
"""

from __future__ import annotations

import ast
import random
import re

import sympy

from propel.python_ast import parse_python

MAX_EXPONENT = 1000
_FUNCS = {
    "sqrt": sympy.sqrt,
    "sin": sympy.sin,
    "cos": sympy.cos,
    "tan": sympy.tan,
    "log": sympy.log,
    "ln": sympy.log,
    "exp": sympy.exp,
    "abs": sympy.Abs,
}
_CONSTS = {"pi": sympy.pi, "e": sympy.E, "i": sympy.I, "oo": sympy.oo, "inf": sympy.oo, "infty": sympy.oo}
_OPS = {ast.Add: sympy.Add, ast.Mult: sympy.Mul}


def latex_to_python(text: str) -> str:
    """Rewrite common LaTeX answer notation as Python expression syntax (best effort)."""
    s = text.strip().strip("$").strip()
    s = re.sub(r"^\\text\{(.*)\}$", r"\1", s)
    for old, new in (
        ("\\left", ""),
        ("\\right", ""),
        ("\\!", ""),
        ("\\,", ""),
        ("\\;", ""),
        ("\\ ", ""),
        ("^\\circ", ""),
        ("^{\\circ}", ""),
        ("\\%", ""),
        ("\\cdot", "*"),
        ("\\times", "*"),
        ("\\div", "/"),
        ("\\infty", "oo"),
        ("{,}", ""),
    ):
        s = s.replace(old, new)
    previous = None
    while previous != s:
        previous = s
        s = re.sub(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}", r"((\1)/(\2))", s)
        s = re.sub(r"\\sqrt\s*\[([^\]]*)\]\s*\{([^{}]*)\}", r"((\2)**(1/(\1)))", s)
        s = re.sub(r"\\sqrt\s*\{([^{}]*)\}", r"sqrt(\1)", s)
    s = re.sub(r"\\(pi|sqrt|sin|cos|tan|log|ln|exp)", r"\1", s)
    s = s.replace("{", "(").replace("}", ")").replace("^", "**")
    s = re.sub(r"(\d)\s*([a-zA-Z(])", r"\1*\2", s)
    s = re.sub(r"\)\s*([a-zA-Z0-9(])", r")*\1", s)
    return s


def _convert(node: ast.AST) -> sympy.Expr:
    if isinstance(node, ast.Expression):
        return _convert(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return sympy.Rational(str(node.value))
    if isinstance(node, ast.Name):
        if node.id in _CONSTS:
            return _CONSTS[node.id]
        if len(node.id) <= 2 and node.id.isalpha():
            return sympy.Symbol(node.id)
        raise ValueError(f"unknown name {node.id}")
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _convert(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _convert(node.left), _convert(node.right)
        if isinstance(node.op, ast.Pow):
            if right.is_number and abs(complex(right)) > MAX_EXPONENT:
                raise ValueError("exponent too large")
            return sympy.Pow(left, right)
        if isinstance(node.op, ast.Sub):
            return sympy.Add(left, -right)
        if isinstance(node.op, ast.Div):
            return sympy.Mul(left, sympy.Pow(right, -1))
        if type(node.op) in _OPS:
            return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCS and not node.keywords:
        return _FUNCS[node.func.id](*[_convert(a) for a in node.args])
    raise ValueError(f"unsupported syntax {type(node).__name__}")


def to_sympy(text: str, max_chars: int = 200) -> sympy.Expr | None:
    """A sympy expression for an answer string, or None when it cannot be read safely."""
    python = latex_to_python(text)
    if not python or len(python) > max_chars:
        return None
    try:
        return _convert(parse_python(python, "eval"))
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError, OverflowError, ZeroDivisionError):
        return None


def equivalent(a: str, b: str, tol: float = 1e-8, points: int = 3) -> bool:
    """True when two answer strings denote the same value (same normalized text, or numerically equal everywhere)."""
    if latex_to_python(a).replace(" ", "") == latex_to_python(b).replace(" ", ""):
        return True
    x, y = to_sympy(a), to_sympy(b)
    if x is None or y is None:
        return False
    try:
        diff = x - y
        symbols = sorted(x.free_symbols | y.free_symbols, key=str)
        rng = random.Random(0)
        for _ in range(points if symbols else 1):
            subs = {s: sympy.Rational(rng.randint(1, 97), rng.randint(1, 13)) for s in symbols}
            value = complex(sympy.N(diff.subs(subs), 30))
            scale = max(1.0, abs(complex(sympy.N(x.subs(subs), 30))))
            if not abs(value) <= tol * scale:
                return False
        return True
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return False
