"""Safe, exact evaluation of arithmetic expressions written by a model (AST whitelist, bounded sizes).

Only numbers, parentheses, unary +/- and the binary operators + - * / // % ** are accepted; arithmetic is exact
(``fractions.Fraction``), exponents are bounded and intermediate results are capped in size, so ``9**9**9`` is refused
rather than hanging the trainer. Nothing is passed to ``eval``.
"""

from __future__ import annotations

import ast
import operator
from fractions import Fraction

from propel.python_ast import parse_python

MAX_EXPONENT = 64
MAX_DIGITS = 200
_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


class ExpressionError(ValueError):
    """Why an expression was refused (the message is a short reason)."""


def _check_size(value: Fraction) -> Fraction:
    if len(str(abs(value.numerator))) > MAX_DIGITS or len(str(value.denominator)) > MAX_DIGITS:
        raise ExpressionError("too_large")
    return value


def _eval(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return Fraction(str(node.value)) if isinstance(node.value, float) else Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        value = _eval(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow):
            if right.denominator != 1 or abs(right) > MAX_EXPONENT:
                raise ExpressionError("bad_exponent")
            if left == 0 and right < 0:
                raise ExpressionError("division_by_zero")
            return _check_size(left ** int(right))
        op = _BINARY.get(type(node.op))
        if op is None:
            raise ExpressionError("bad_operator")
        if right == 0 and isinstance(node.op, (ast.Div, ast.FloorDiv, ast.Mod)):
            raise ExpressionError("division_by_zero")
        return _check_size(Fraction(op(left, right)))
    raise ExpressionError("not_arithmetic")


def normalize_expression(text: str) -> str:
    """Accept common typography: x and ÷, ^ for power, thousands separators are NOT accepted (ambiguous)."""
    return text.strip().rstrip(".").replace("×", "*").replace("÷", "/").replace("^", "**").replace("−", "-")


def evaluate(text: str, max_chars: int = 300) -> Fraction:
    """Exact value of an arithmetic expression; raises ``ExpressionError`` with a short reason."""
    if len(normalize_expression(text)) > max_chars:
        raise ExpressionError("expression_too_long")
    tree = _tree(text)
    try:
        return _eval(tree)
    except RecursionError:
        raise ExpressionError("too_deep") from None


def quantities(text: str) -> list[Fraction]:
    """The numbers written in an expression, in order (signs are operations, not part of a quantity); raises
    ``ExpressionError`` as ``evaluate`` does."""
    tree = _tree(text)
    return [Fraction(str(n.value)) for n in ast.walk(tree) if isinstance(n, ast.Constant)]


def operations(text: str) -> int:
    """How many binary operations an expression performs (``3`` and ``-3`` perform none)."""
    return sum(isinstance(n, ast.BinOp) for n in ast.walk(_tree(text)))


def evaluate_replacing(text: str, old: Fraction, new: Fraction) -> Fraction:
    """The expression's value with every written ``old`` quantity replaced by ``new``: whether a quantity matters."""

    class _Swap(ast.NodeTransformer):
        def visit_Constant(self, node: ast.Constant) -> ast.AST:
            if type(node.value) in (int, float) and Fraction(str(node.value)) == old:
                return ast.Constant(value=float(new) if new.denominator != 1 else int(new))
            return node

    try:
        return _eval(_Swap().visit(_tree(text)))
    except RecursionError:
        raise ExpressionError("too_deep") from None


def _tree(text: str) -> ast.AST:
    text = normalize_expression(text)
    if not text:
        raise ExpressionError("empty_expression")
    try:
        return parse_python(text, "eval")
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        raise ExpressionError("syntax_error") from None
