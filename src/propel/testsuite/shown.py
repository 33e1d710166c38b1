"""What a task shows the policy: the inputs in its prompt and its visible tests, so held-out tests can be unseen.

A held-out test pays because the policy could not have read its answer. A test whose input the prompt already shows
(a docstring example, whatever its formatting) or a visible test already calls pays a completion that parses its own
prompt and returns the examples' outputs, whatever it does elsewhere. So "shown" is decided by value, never by
spelling: every call of the entry point in the prompt text is read as an argument tuple (``f(1, 2)``,
``f( 1,2 )`` and ``f(1, 2) ➞ 3`` are the same input), every literal the prompt spells (a list, a quoted string, a
number, in prose or in an example) is a value the policy has seen, and the visible tests' calls are inputs too. An
input is shown when it equals a shown call's arguments, when its one argument is a value the prompt spells, or when
its arguments are values the prompt spells in their order within a few lines (``Input: arr = [1, 2, 3], k = 2``;
small numbers scattered through the prose do not make a multi-argument input shown). Comparisons are Python's
``==`` on the evaluated values.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from propel.python_ast import parse_python

_QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"")
_NUMBER = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?!\w)")
_OPEN, _CLOSE = "([{", ")]}"
_MAX_SPAN = 4000
"""Longest bracketed span read as one literal (a docstring's example, not a whole file)."""
WINDOW = 160
"""Characters from a multi-argument input's first argument to its last, when they are spelled as separate values
(an example's ``Input:`` lines)."""


def _literal(source: str):
    """``(True, value)`` when ``source`` is a Python literal, else ``(False, None)``."""
    try:
        return True, ast.literal_eval(source)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _closing(text: str, start: int) -> int:
    """The index of the bracket closing the one at ``start`` (-1 when none within ``_MAX_SPAN``): nesting counted,
    brackets inside a quoted string on one line skipped."""
    depth, i, end = 0, start, min(len(text), start + _MAX_SPAN)
    while i < end:
        c = text[i]
        if c in "'\"":
            close = text.find(c, i + 1, end)
            if close != -1 and "\n" not in text[i:close]:
                i = close
        elif c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def prompt_calls(prompt: str, entry_point: str) -> list[tuple]:
    """Argument tuples of every call of ``entry_point`` the prompt spells with literal arguments, in any format."""
    out = []
    for match in re.finditer(rf"(?<![\w.]){re.escape(entry_point)}\s*\(", prompt):
        start = match.end() - 1
        end = _closing(prompt, start)
        if end == -1:
            continue
        ok, args = _literal(f"({prompt[start + 1 : end]},)") if prompt[start + 1 : end].strip() else (True, ())
        if ok and isinstance(args, tuple):
            out.append(args)
    return out


def prompt_values(prompt: str) -> list[tuple[int, int, object]]:
    """``(start, end, value)`` of every literal the prompt spells, in text order: bracketed literals (each nested one
    too), quoted strings and numbers. The docstring's own triple quotes are not string literals."""
    text = prompt.replace('"""', "   ").replace("'''", "   ")
    values = []
    for i, c in enumerate(text):
        if c in _OPEN:
            end = _closing(text, i)
            ok, value = _literal(text[i : end + 1]) if end != -1 else (False, None)
            if ok:
                values.append((i, end + 1, value))
    for pattern in (_QUOTED, _NUMBER):
        for match in pattern.finditer(text):
            ok, value = _literal(match.group())
            if ok:
                values.append((match.start(), match.end(), value))
    return sorted(values, key=lambda item: item[0])


def _equal(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - a comparison that cannot be made is not equality
        return False


def among(value, pool: Iterable) -> bool:
    """Whether ``value`` equals (``==``) an item of ``pool``."""
    return any(_equal(value, other) for other in pool)


@dataclass
class Shown:
    """The inputs a task shows: argument tuples of calls (prompt and visible tests) and the prompt's literal values."""

    calls: list[tuple] = field(default_factory=list)
    values: list[tuple[int, int, object]] = field(default_factory=list)
    """``(start, end, value)`` of the prompt's literals, in text order."""

    @classmethod
    def of(cls, prompt: str, entry_point: str, visible: Sequence[tuple] = ()) -> Shown:
        return cls([*prompt_calls(prompt, entry_point), *visible], prompt_values(prompt))

    def shows(self, args: tuple) -> bool:
        """Whether the argument tuple ``args`` was shown: equal to a shown call's arguments, its one argument a value
        the prompt spells, or its arguments values the prompt spells in order within ``WINDOW`` characters."""
        if among(args, self.calls):
            return True
        if not args:
            return False
        firsts = [(at, end) for at, end, value in self.values if _equal(args[0], value)]
        return any(self._follows(args[1:], end, at + WINDOW) for at, end in firsts)

    def _follows(self, rest: tuple, after: int, limit: int) -> bool:
        """Whether ``rest`` are spelt in order, each starting after the previous one ends, before ``limit``."""
        if not rest:
            return True
        return any(
            after <= at <= limit and _equal(rest[0], value) and self._follows(rest[1:], end, limit)
            for at, end, value in self.values
        )


def call_sources(body: str, names: Sequence[str] = ("candidate",)) -> list[str]:
    """The argument lists (source) of the calls of ``names`` in a test body (``"[1, 2], 3"``)."""
    try:
        tree = parse_python(body)
    except SyntaxError:
        return []
    return [
        ", ".join(ast.unparse(a) for a in node.args)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in names
    ]


def literal_args(source: str) -> tuple | None:
    """An argument list's source as the tuple it evaluates to (None when it is not all literals)."""
    ok, args = _literal(f"({source},)") if source.strip() else (True, ())
    return args if ok and isinstance(args, tuple) else None


def body_inputs(body: str, entry_point: str) -> list[tuple | None]:
    """The inputs a test body calls the function with (None for a call whose arguments are computed)."""
    return [literal_args(s) for s in call_sources(body, ("candidate", entry_point))]


def split_unseen(
    visible: Sequence[str], hidden: Sequence[str], prompt: str, entry_point: str
) -> tuple[list[str], list[str]]:
    """``(visible, held_out)`` test bodies: a held-out body that calls the function with a shown input (the prompt's
    or a visible test's) is shown itself and joins the visible ones; the rest stay held out."""
    seen = [args for body in visible for args in body_inputs(body, entry_point) if args is not None]
    shown = Shown.of(prompt, entry_point, seen)
    moved, kept = [], []
    for body in hidden:
        inputs = [a for a in body_inputs(body, entry_point) if a is not None]
        (moved if any(shown.shows(a) for a in inputs) else kept).append(body)
    return [*visible, *moved], kept


def distinct_inputs(bodies: Sequence[str], entry_point: str) -> int:
    """How many distinct inputs the bodies call the function with; a body whose inputs are computed (a loop, a
    random draw) counts as one."""
    literal: list[tuple] = []
    opaque = 0
    for body in bodies:
        inputs = body_inputs(body, entry_point)
        if not inputs or any(a is None for a in inputs):
            opaque += 1
        for args in inputs:
            if args is not None and not among(args, literal):
                literal.append(args)
    return len(literal) + opaque
