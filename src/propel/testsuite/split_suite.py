"""A split suite: named test bodies that call ``candidate(...)`` (HumanEval's ``check`` split one test per
assertion), graded by value (the default) or as a hardened pytest run.

For value grading the bodies travel as they are (``value_tests``). For pytest (``pytest_files``) each graded run gets
its own files: every test, real or canary, renamed to an opaque ``test_<hex>`` and shuffled across two modules, the
task's pristine prompt as ``_task.py`` (the tests' helpers come from there, never from the solution: no star import
brings the model's names into a test module), and ``candidate`` as a fixture that imports the solution, so collection
(and the snapshot of the test modules) completes before any model code runs. The fixture hands the tests what the
candidate returned as plain data (value grading's codec, ``_propel_plain.py``), so both graders compare the same
values and an object that brings its own ``==`` fails the test (``custom_eq``). Canaries come in pairs: two copies of a
real ``assert candidate(...) == <literal>`` test, one expecting the real value and one expecting another value of the
same type (``True`` and ``False`` for a predicate). A plain return value, right or wrong, equals at most one of the
two; only a run that does not compare honestly (an always-equal value, a read of the expected value off the assert
line, a forged report) passes both.
"""

from __future__ import annotations

import ast
import functools
import random
from dataclasses import dataclass
from importlib import resources

from propel.python_ast import parse_python
from propel.testsuite.runner import pristine_ini
from propel.testsuite.values import ValueTests


@dataclass
class SplitSuite:
    """The task's tests as named bodies, with what they need."""

    tests: dict[str, str]
    """Test name -> its body (statements ending in assertions on ``candidate(...)``)."""
    entry_point: str
    helpers: str = ""
    """The task's pristine prompt (its helper functions; its stub of the entry point is never the candidate)."""
    preamble: str = ""
    module: str = "solution"

    def bodies(self) -> dict[str, str]:
        """The tests with the entry point's own name read as ``candidate`` (a HumanEval check such as
        ``tuple(candidate(x)) == tuple(sort_third(x))`` means the function under test both times, as in the
        benchmark's harness, never the prompt's stub)."""
        return {name: _as_candidate(body, self.entry_point) for name, body in self.tests.items()}

    def value_tests(self) -> ValueTests:
        return ValueTests(list(self.bodies().items()), self.entry_point, self.helpers, self.preamble, self.module)


@dataclass
class PytestRun:
    """The files of one graded pytest run and how its test names map back."""

    files: dict[str, str]
    names: dict[str, str]
    """Opaque test name -> the real test's name."""
    canaries: list[tuple[str, str]]
    """Opaque names of each canary pair (real expected value, changed expected value)."""


class _Rename(ast.NodeTransformer):
    def __init__(self, name: str) -> None:
        self.name = name

    def visit_Name(self, node: ast.Name) -> ast.AST:
        return ast.copy_location(ast.Name("candidate", node.ctx), node) if node.id == self.name else node


def _as_candidate(body: str, entry_point: str) -> str:
    if entry_point not in body:
        return body
    try:
        return ast.unparse(_Rename(entry_point).visit(parse_python(body)))
    except SyntaxError:
        return body


def perturbed(value: object) -> object:
    """A value of the same type that is not equal to ``value`` (None becomes 0)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value + 1.0 if value == value else 0.0
    if isinstance(value, str):
        return value + "_" if value else "x"
    if isinstance(value, list | tuple):
        extra = value[0] if value else 0
        return type(value)([*value, extra])
    if isinstance(value, dict):
        return {**value, "__propel_canary__": 0}
    if isinstance(value, set | frozenset):
        return type(value)({*value, "__propel_canary__"})
    raise TypeError(f"cannot perturb a {type(value).__name__}")


def canary_body(body: str) -> str | None:
    """``body`` with its final ``assert candidate(...) == <literal>`` expecting another value of the same type, or
    None when the body does not end in such an assertion."""
    try:
        tree = parse_python(body)
    except SyntaxError:
        return None
    last = tree.body[-1] if tree.body else None
    if not isinstance(last, ast.Assert) or not isinstance(last.test, ast.Compare):
        return None
    test = last.test
    if len(test.ops) != 1 or not isinstance(test.ops[0], ast.Eq) or len(test.comparators) != 1:
        return None
    call, expected = test.left, test.comparators[0]
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "candidate"):
        return None
    try:
        value = ast.literal_eval(expected)
        changed = perturbed(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    test.comparators[0] = parse_python(repr(changed), "eval").body
    return ast.unparse(tree)


PLAIN = """

class OwnEquality(AssertionError):
    \"\"\"The candidate returned an object that brings its own ``==``.\"\"\"


def plain(value, graded_dir):
    \"\"\"What the candidate returned, as the plain data value grading would compare.\"\"\"
    if own_equality(value, graded_dir):
        raise OwnEquality(f"a {type(value).__qualname__} defines its own equality")
    return decode(encode(value))
"""


@functools.lru_cache(maxsize=1)
def plain_helper() -> str:
    """``_propel_plain.py`` of a graded pytest run: value grading's codec, so a test compares what the candidate's
    value holds (an ``int`` subclass as its integer; an always-equal object not at all), as the value grader does."""
    return resources.files("propel.testsuite").joinpath("propel_box", "codec.py").read_text() + PLAIN


def _indent(body: str) -> str:
    return "".join(f"    {line}\n" if line.strip() else "\n" for line in body.splitlines())


def pytest_files(suite: SplitSuite, rng: random.Random, n_canaries: int = 3) -> PytestRun:
    """The files of one hardened pytest run of ``suite`` (see the module docstring), drawn with ``rng``."""
    bodies = suite.bodies()
    entries: list[tuple[str, str, int | None]] = [(name, body, None) for name, body in bodies.items()]
    eligible = [(body, c) for body in bodies.values() if (c := canary_body(body)) is not None]
    for k, (same, changed) in enumerate(rng.sample(eligible, min(n_canaries, len(eligible)))):
        entries += [("", same, 2 * k), ("", changed, 2 * k + 1)]
    rng.shuffle(entries)
    head = (
        "import os\n\n"
        "import pytest\n"
        "from _propel_plain import plain as _propel_plain\n"
        "from _task import *  # noqa: F403 - the task's own helpers, from its pristine prompt\n"
        f"{suite.preamble}\n\n\n"
        "@pytest.fixture\n"
        "def candidate():\n"
        f"    import {suite.module}\n\n"
        f"    function, graded = {suite.module}.{suite.entry_point}, os.getcwd() + '/'\n"
        "    return lambda *args, **kwargs: _propel_plain(function(*args, **kwargs), graded)\n"
    )
    modules: list[list[str]] = [[head], [head]]
    names: dict[str, str] = {}
    slots: dict[int, str] = {}
    used: set[str] = set()
    for i, (name, body, slot) in enumerate(entries):
        opaque = f"test_{rng.getrandbits(40):010x}"
        while opaque in used:
            opaque = f"test_{rng.getrandbits(40):010x}"
        used.add(opaque)
        if slot is None:
            names[opaque] = name
        else:
            slots[slot] = opaque
        modules[i % 2].append(f"\n\ndef {opaque}(candidate):\n" + _indent(body))
    canaries = [(slots[2 * k], slots[2 * k + 1]) for k in range(len(slots) // 2)]
    files = {"pytest.ini": pristine_ini(), "_task.py": suite.helpers, "_propel_plain.py": plain_helper()}
    for parts in modules:
        module = f"test_{rng.getrandbits(32):08x}.py"
        while module in files:
            module = f"test_{rng.getrandbits(32):08x}.py"
        files[module] = "".join(parts)
    return PytestRun(files, names, canaries)
