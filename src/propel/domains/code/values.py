"""Compare and display the tagged values produced by ``harness.encode``: by value, never by truncated text.

NaN equals NaN, floats compare with a tolerance, ints and floats compare numerically, sets and dicts ignore order,
and long outputs are compared whole.
"""

from __future__ import annotations

import ast
import math
import re
from typing import Any

from propel.domains.code.harness import encode

_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_NUMERIC = {"int", "float"}


def has_address(value: Any) -> bool:
    """True when an encoded value contains an object repr with a memory address (differs across processes)."""
    if not isinstance(value, list):
        return False
    if len(value) == 3 and value[0] == "repr":
        return bool(_ADDRESS.search(value[2]))
    return any(has_address(part) for part in value)


def _number(value: list) -> float | int:
    return int(value[1]) if value[0] == "int" else float(value[1])


def values_equal(a: Any, b: Any, rel_tol: float = 1e-6, abs_tol: float = 1e-9) -> bool:
    """Value equality of two encoded values (see module docstring)."""
    if a[0] in _NUMERIC and b[0] in _NUMERIC:
        if a[0] == b[0] == "int":
            return a[1] == b[1]
        x, y = float(_number(a)), float(_number(b))
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return x == y or math.isclose(x, y, rel_tol=rel_tol, abs_tol=abs_tol)
    if a[0] != b[0]:
        return False
    tag = a[0]
    if tag == "complex":
        return all(
            values_equal(["float", p], ["float", q], rel_tol, abs_tol) for p, q in zip(a[1:], b[1:], strict=False)
        )
    if tag in ("list", "tuple"):
        return len(a[1]) == len(b[1]) and all(
            values_equal(x, y, rel_tol, abs_tol) for x, y in zip(a[1], b[1], strict=False)
        )
    if tag in ("set", "dict"):
        return len(a[1]) == len(b[1]) and _unordered_equal(a[1], b[1], tag, rel_tol, abs_tol)
    if tag == "repr":
        return a[2] == b[2]
    return a == b


def _unordered_equal(xs: list, ys: list, tag: str, rel_tol: float, abs_tol: float) -> bool:
    remaining = list(ys)
    for x in xs:
        for i, y in enumerate(remaining):
            same = (
                values_equal(x[0], y[0], rel_tol, abs_tol) and values_equal(x[1], y[1], rel_tol, abs_tol)
                if tag == "dict"
                else values_equal(x, y, rel_tol, abs_tol)
            )
            if same:
                del remaining[i]
                break
        else:
            return False
    return True


def display(value: Any) -> str:
    """Python-literal-like text of an encoded value, for prompts."""
    tag = value[0]
    if tag == "none":
        return "None"
    if tag in ("bool", "int", "float"):
        return str(value[1])
    if tag == "complex":
        return f"complex({value[1]}, {value[2]})"
    if tag == "str":
        return repr(value[1])
    if tag == "bytes":
        return repr(bytes.fromhex(value[1]))
    if tag == "list":
        return "[" + ", ".join(display(v) for v in value[1]) + "]"
    if tag == "tuple":
        inner = ", ".join(display(v) for v in value[1])
        return f"({inner},)" if len(value[1]) == 1 else f"({inner})"
    if tag == "set":
        return "{" + ", ".join(display(v) for v in value[1]) + "}" if value[1] else "set()"
    if tag == "dict":
        return "{" + ", ".join(f"{display(k)}: {display(v)}" for k, v in value[1]) + "}"
    return value[2]


def encode_literal(text: str) -> list | None:
    """Encode a solver's answer written as a Python literal (``nan``/``inf`` allowed); None if it is not one."""
    text = text.strip().rstrip(".")
    try:
        return encode(ast.literal_eval(text))
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if text.lstrip("+-").lower() in ("nan", "inf", "infinity"):
        return encode(float(text))
    return None
