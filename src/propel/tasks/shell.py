"""A tiny built-in task family for ``ToolEnv``, small enough that a 135M model sometimes finishes one.

Three kinds, each a ``Context`` with starting ``files`` and its check as data (``propel.envs.verdict``):
``create_file`` (a file holding a given word: ``expect_files``), ``copy_line`` (the first line of a file into
another file: ``expect_files``) and ``fix_function`` (a one-character bug that makes ``python3 check.py`` fail:
``value_tests`` on the fixed function, the shown input and two more, graded by value outside the workspace). They
exist so CPU tests and demo-scale runs drive real episodes in a real sandbox; they are not a benchmark.
"""

from __future__ import annotations

import random

from propel.engines.tool_calls import ToolCall, format_tool_call
from propel.errors import ConfigError
from propel.records import Context, Prompt, TaskSource

KINDS = ("create_file", "copy_line", "fix_function")
_WORDS = ["apple", "river", "stone", "cloud", "maple", "tiger", "piano", "lemon", "ocean", "amber", "cedar", "delta"]
_NAMES = ["notes", "answer", "result", "word", "out", "data", "memo", "item"]
_OPS = [("add", "+", "-", 2, 3), ("mul", "*", "+", 4, 5), ("sub", "-", "+", 9, 4)]


# A solved example opening the conversation: small models copy a demonstrated call far more often than they follow
# a described one (SmolLM2-135M writes prose instead of calls without it).
DEMONSTRATION = [
    {"role": "user", "content": "Create a file named hello.txt that contains exactly the word sun. Then submit."},
    {"role": "assistant", "content": format_tool_call(ToolCall("write_file", {"path": "hello.txt", "content": "sun"}))},
    {"role": "tool", "content": "wrote 3 characters to hello.txt"},
    {"role": "assistant", "content": format_tool_call(ToolCall("submit", {}))},
]


class ShellTasks(TaskSource):
    """Deterministic contexts for ``ToolEnv``: ``contexts(n, seed)`` (the ``Domain.contexts`` contract).

    Args:
        kinds: which task kinds to draw from (uniformly).
        demonstration: open each conversation with one solved example task (``DEMONSTRATION``).
    """

    def __init__(self, kinds: list[str] | None = None, demonstration: bool = True) -> None:
        kinds = list(kinds or KINDS)
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown or not kinds:
            raise ConfigError(f"ShellTasks kinds must be a non-empty subset of {KINDS}, got {kinds}")
        self.kinds, self.demonstration = kinds, demonstration

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        rng = random.Random(seed)
        out = [self._task(rng.choice(self.kinds), rng, f"shell-{seed}-{i}") for i in range(n)]
        if self.demonstration:
            for c in out:
                c.prompt = Prompt(messages=[*DEMONSTRATION, *c.prompt.messages])
        return out

    @staticmethod
    def _task(kind: str, rng: random.Random, task_id: str) -> Context:
        name, word = f"{rng.choice(_NAMES)}.txt", rng.choice(_WORDS)
        files: dict[str, str] = {}
        check: dict = {}
        if kind == "create_file":
            text = f"Create a file named {name} that contains exactly the word {word}. Then submit."
            check["expect_files"] = {name: word}
        elif kind == "copy_line":
            lines = rng.sample(_WORDS, 3)
            files["input.txt"] = "\n".join(lines) + "\n"
            text = f"Write the first line of input.txt into a new file {name}. Then submit."
            check["expect_files"] = {name: lines[0]}
        else:
            fn, good, bad, a, b = rng.choice(_OPS)
            files["calc.py"] = f"def {fn}(a, b):\n    return a {bad} b\n"
            files["check.py"] = f"from calc import {fn}\nassert {fn}({a}, {b}) == {a} {good} {b}, 'wrong result'\n"
            text = f"`python3 check.py` fails because {fn} in calc.py is wrong. Fix calc.py. Then submit."
            inputs = [(a, b), (b + 3, a + 1), (7, 2)]
            tests = [[f"check_{i}", f"assert candidate({x}, {y}) == {x} {good} {y}"] for i, (x, y) in enumerate(inputs)]
            check["value_tests"] = {"module": "calc", "entry_point": fn, "tests": tests}
        messages = [{"role": "user", "content": text}]
        return Context(
            id=task_id,
            prompt=Prompt(messages=messages),
            group=kind,
            data={"kind": kind, "files": files, **check},
        )
