"""Python source to an AST, safe to call from several threads at once.

CPython 3.11.7 (the interpreter this project's CI runs) keeps the AST converter's recursion depth in
interpreter-wide state (python/cpython#106905). When two threads parse at once and a garbage collection inside one
conversion runs Python code (a finalizer), the other thread can take the GIL mid-conversion, and the first then fails
with ``SystemError: AST constructor recursion depth mismatch``: a valid program reported as an error
(``tests/test_python_ast.py`` stages it). propel parses in threads (SWE bug validators run side by side, sandbox
pools), and a verdict must not depend on thread timing, so every parse in the package goes through one lock.
"""

from __future__ import annotations

import ast
import threading
from typing import Literal, overload

_PARSE = threading.RLock()  # re-entrant: a finalizer inside a parse may parse too


@overload
def parse_python(source: str, mode: Literal["exec"] = "exec", filename: str = "<unknown>") -> ast.Module: ...
@overload
def parse_python(source: str, mode: Literal["eval"], filename: str = "<unknown>") -> ast.Expression: ...


def parse_python(source: str, mode: str = "exec", filename: str = "<unknown>") -> ast.Module | ast.Expression:
    """``ast.parse(source, filename, mode)`` under the package's parse lock (raises what ``ast.parse`` raises)."""
    with _PARSE:
        return ast.parse(source, filename=filename, mode=mode)
