"""Python source to an AST, safe to call from several threads at once.

CPython 3.11.0-3.11.7 and 3.12.0-3.12.1 keep the AST converter's recursion depth in interpreter-wide state
(python/cpython#106905, fixed in 3.11.8 and 3.12.2). When two threads parse at once and a garbage collection inside
one conversion runs Python code (a finalizer), the other thread can take the GIL mid-conversion, and the first then
fails with ``SystemError: AST constructor recursion depth mismatch``: a valid program reported as an error
(``tests/test_python_ast.py`` stages it). propel parses in threads (SWE bug validators run side by side, sandbox
pools), and a verdict must not depend on thread timing. Since the state is the interpreter's, so is the lock: on an
affected interpreter, importing this module (every propel module that parses does) wraps ``ast.parse`` itself, so
every parse in the process takes it, the standard library's too (``ast.literal_eval``, and Python 3.11's tracebacks,
which parse a line to place their carets); ``parse_python`` is the package's spelling of the same call.
"""

from __future__ import annotations

import ast
import functools
import sys
import threading
from typing import Literal, overload

_PARSE = threading.RLock()  # re-entrant: a finalizer inside a parse may parse too
AFFECTED = (3, 11) <= sys.version_info[:3] < (3, 11, 8) or (3, 12) <= sys.version_info[:3] < (3, 12, 2)
"""Whether this interpreter shares the converter's depth between threads (python/cpython#106905)."""


def _lock_ast_parse() -> None:
    """Wrap ``ast.parse`` (once) so every caller in the process parses under ``_PARSE``."""
    original = ast.parse
    if getattr(original, "propel_locked", False):
        return

    @functools.wraps(original)
    def parse(*args, **kwargs):
        with _PARSE:
            return original(*args, **kwargs)

    parse.propel_locked = True  # type: ignore[attr-defined]
    ast.parse = parse


if AFFECTED:
    _lock_ast_parse()


@overload
def parse_python(source: str, mode: Literal["exec"] = "exec", filename: str = "<unknown>") -> ast.Module: ...
@overload
def parse_python(source: str, mode: Literal["eval"], filename: str = "<unknown>") -> ast.Expression: ...


def parse_python(source: str, mode: str = "exec", filename: str = "<unknown>") -> ast.Module | ast.Expression:
    """``ast.parse(source, filename, mode)`` under the process's parse lock (raises what ``ast.parse`` raises)."""
    with _PARSE:
        return ast.parse(source, filename=filename, mode=mode)
