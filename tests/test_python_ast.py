"""A parse that overlaps another thread's parse gives the same tree as one alone. CPython 3.11.7 keeps the AST
converter's recursion depth in interpreter-wide state (python/cpython#106905): when a finalizer inside one thread's
conversion lets another thread parse, the first fails with a spurious ``SystemError``. The test stages exactly that
overlap, deterministically: a garbage cycle whose finalizer, once it runs inside ``ast.parse``, starts a second
thread's parse and waits for it (a short while: with the lock, that parse waits for the first one instead)."""

from __future__ import annotations

import ast
import gc
import threading

import pytest

from propel.python_ast import parse_python

SOURCE = "def f(x):\n    return [g(y) for y in x if y]\n" * 200


def _deep(depth: int, work):
    """``work()`` called ``depth`` frames further down: the two threads' parses start at different depths."""
    return work() if depth == 0 else _deep(depth - 1, work)


LITERAL = repr([list(range(20))] * 200)
OTHERS = {  # the other thread's parse: the package's, and two the standard library makes (tracebacks parse a line)
    "parse_python": lambda: ast.dump(parse_python(SOURCE)),
    "ast.parse": lambda: ast.dump(ast.parse(SOURCE)),
    "ast.literal_eval": lambda: ast.literal_eval(LITERAL),
}


@pytest.mark.parametrize("how", list(OTHERS))
def test_a_parse_overlapping_another_threads_parse_succeeds(how):
    other: dict[str, object] = {}
    overlapped = threading.Event()
    original = getattr(ast.parse, "__wrapped__", ast.parse)  # the frame the conversion runs in

    def other_parse() -> None:
        try:
            other["tree"] = _deep(30, OTHERS[how])
        except BaseException as error:
            other["error"] = error

    class Trap:
        """Cyclic garbage; its finalizer, when it runs inside a parse, lets the other thread parse meanwhile."""

        def __init__(self) -> None:
            self.me = self

        def __del__(self) -> None:
            import sys

            if overlapped.is_set():
                return
            if sys._getframe(1).f_code is not original.__code__:
                Trap()  # collected outside the conversion: plant another
                return
            overlapped.set()
            thread = threading.Thread(target=other_parse)
            other["thread"] = thread
            thread.start()
            thread.join(timeout=0.5)  # under the parse lock the other parse waits for this one: don't wait forever

    threshold = gc.get_threshold()
    gc.collect()
    gc.set_threshold(1)
    try:
        Trap()
        tree = ast.dump(parse_python(SOURCE))
    finally:
        gc.set_threshold(*threshold)
    assert overlapped.is_set(), "the finalizer never ran inside the parse: the overlap was not staged"
    other["thread"].join()  # type: ignore[attr-defined]
    assert tree == ast.dump(ast.parse(SOURCE))
    assert other.get("error") is None and other["tree"] == OTHERS[how]()


def test_eval_mode_and_syntax_errors_are_ast_parse_s():
    assert isinstance(parse_python("1 + x", "eval"), ast.Expression)
    try:
        parse_python("def (:")
    except SyntaxError as error:
        assert error.filename == "<unknown>"
    else:
        raise AssertionError("a syntax error was not raised")


def test_every_parse_in_the_package_goes_through_the_lock():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1] / "src" / "propel"
    direct = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "python_ast.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "ast.parse":
                direct.append(f"{path.relative_to(root)}:{node.lineno}")
    assert direct == [], f"parse with propel.python_ast.parse_python instead: {direct}"
