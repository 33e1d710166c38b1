"""The AZR code domain: the generator writes a function ``f``, 10 literal inputs and a message.

Valid iff the code passes the static allowlist check, runs on every input in the sandbox within limits, gives the same
outputs in two separate processes (different hash seeds), and no output is an object repr with a memory address.
Modes: ``induction`` (the solver sees 5 input/output pairs + the message, writes ``f``; graded by running it on the 5
hidden inputs) and ``deduction`` (the solver predicts ``f`` on hidden inputs; easier for small solvers).

Strict validity (the default): a function whose output needs no computation from its inputs is degenerate.
``constant_output``: every input gives the same output (any shown output answers every hidden one);
``returns_input``: for some argument position, every output equals that argument (the answer is in the question).
"""

from __future__ import annotations

import ast
import json
import random
import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from pathlib import Path

from propel.domains.agents import SolvedByAgents
from propel.domains.code import harness
from propel.domains.code.features import code_features
from propel.domains.code.harness import encode
from propel.domains.code.parsing import parse_generation, python_code
from propel.domains.code.safety import ALLOWED_MODULES, check_source
from propel.domains.code.topic import code_topic
from propel.domains.code.values import display, encode_literal, has_address, values_equal
from propel.domains.interface import Domain, ParseFailure, Verdict
from propel.records import Context, Prompt, Task
from propel.sandbox.job import Job, Limits, Outcome, Result
from propel.sandbox.sandbox import Sandbox

MODES = ("induction", "deduction")
SOLUTION_FILE = "solution.py"
"""Where an agent solver writes ``f`` in induction mode (``CodeDomain.agent_context``)."""
_ANSWER = re.compile(r"(?im)^[ \t>*]*answer(?:\s*(\d+))?\s*[:=]\s*(.+?)\s*$")

GENERATOR_INSTRUCTION = (
    "Write a new Python function `f` that a careful programmer could figure out from examples, together with "
    "{n_inputs} different inputs (one call's arguments per line, Python literals only) and a short message that hints "
    "at what `f` does without giving it away. Use only the standard modules math, itertools, functools, collections, "
    "string, re, heapq, bisect, operator. No printing, randomness, time, files or input(). Use exactly this format:\n\n"
)


@cache
def seed_examples() -> list[dict]:
    """The seed functions shipped as package data (each with 10 inputs and a message)."""
    text = resources.files("propel.domains").joinpath("data/code_seeds.json").read_text()
    return json.loads(text)


def _format_task(source: str, inputs: Sequence[str], message: str) -> str:
    lines = "\n".join(inputs)
    return f"```python\n{source.rstrip()}\n```\n```input\n{lines}\n```\n```message\n{message}\n```"


def _call_args(inp: str) -> str:
    """``repr`` of an argument tuple -> the text between the call's parentheses."""
    return inp[1:-1].rstrip().rstrip(",")


class CodeDomain(Domain, SolvedByAgents):
    """AZR function tasks (see module docstring).

    Args:
        mode: ``induction`` or ``deduction``.
        n_inputs: inputs the generator must write (the first ``n_shown`` are shown to the induction solver).
        n_shown: input/output pairs shown in induction; the rest are hidden and graded.
        n_query: hidden inputs the deduction solver must predict (all must be right).
        few_shot: seed examples per generator prompt.
        timeout_s: wall-clock limit per sandbox job (all inputs of one task).
        memory_mb: memory limit per sandbox job.
        max_output_chars: largest encoded output of one task (bigger tasks are invalid, never truncated).
        rel_tol: relative tolerance for float outputs.
        strict: degenerate tasks (see the module docstring) are invalid; False records the reason and keeps them.
    """

    name = "code"
    degenerate_reasons = ("constant_output", "returns_input")

    def __init__(
        self,
        mode: str = "induction",
        n_inputs: int = 10,
        n_shown: int = 5,
        n_query: int = 1,
        few_shot: int = 2,
        timeout_s: float = 5.0,
        memory_mb: int = 512,
        max_output_chars: int = 20_000,
        rel_tol: float = 1e-6,
        strict: bool = True,
    ):
        if mode not in MODES:
            raise ValueError(f"CodeDomain mode must be one of {MODES}, got {mode!r}")
        if not 0 < n_shown < n_inputs:
            raise ValueError(f"CodeDomain needs 0 < n_shown < n_inputs, got n_shown={n_shown}, n_inputs={n_inputs}")
        if not 0 < n_query <= n_inputs - n_shown:
            raise ValueError(f"CodeDomain n_query must be in 1..{n_inputs - n_shown}, got {n_query}")
        if not 0 < few_shot <= len(seed_examples()):
            raise ValueError(f"CodeDomain few_shot must be in 1..{len(seed_examples())}, got {few_shot}")
        self.mode, self.n_inputs, self.n_shown, self.n_query, self.few_shot = mode, n_inputs, n_shown, n_query, few_shot
        self.limits = Limits(timeout_s=timeout_s, memory_mb=memory_mb, max_output_bytes=4 * max_output_chars + 65536)
        self.max_output_chars, self.rel_tol, self.strict = max_output_chars, rel_tol, strict
        self.solver_stop = ()

    # generator side ---------------------------------------------------------------------------------------------
    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        examples = seed_examples()
        out = []
        for i in range(n):
            rng = random.Random(f"code:{seed}:{i}")
            picks = rng.sample(range(len(examples)), self.few_shot)
            shots = "\n\n".join(_format_task(**examples[j]) for j in picks)
            text = GENERATOR_INSTRUCTION.format(n_inputs=self.n_inputs) + shots + "\n\nNow write a new, different one."
            group = "seeds-" + "-".join(str(j) for j in sorted(picks))
            out.append(
                Context(id=f"code-{seed}-{i}", prompt=Prompt(messages=[{"role": "user", "content": text}]), group=group)
            )
        return out

    def parse(self, completion: str) -> Task | ParseFailure:
        parsed = parse_generation(completion, self.n_inputs)
        if isinstance(parsed, str):
            return ParseFailure(parsed)
        return Task(domain=self.name, data=parsed)

    # validity ---------------------------------------------------------------------------------------------------
    def _job(self, source: str, inputs: Sequence[str], fresh: bool = False) -> Job:
        """A harness job; ``fresh`` starts a new interpreter (own hash seed) instead of a backend's forked worker."""
        request = json.dumps(
            {"source": source, "inputs": list(inputs), "func": "f", "allowed": sorted(ALLOWED_MODULES)}
        )
        code = Path(harness.__file__).read_text()
        if fresh:
            return Job(
                command=["python3", "-I", "harness.py"], files={"harness.py": code}, stdin=request, limits=self.limits
            )
        return Job(source=code, stdin=request, limits=self.limits)

    @staticmethod
    def _read(result: Result) -> tuple[list | None, str]:
        """(results, hash) from a harness run, or (None, reason)."""
        if not result.ok:
            return None, result.outcome.value
        line = next((ln for ln in reversed(result.stdout.splitlines()) if ln.startswith(harness.MARKER)), None)
        if line is None:
            return None, "no_result"
        payload = json.loads(line[len(harness.MARKER) :])
        return payload["results"], str(payload["hash"])

    def run_function(
        self, items: Sequence[tuple[str, Sequence[str]]], sandbox: Sandbox, fresh: bool = False
    ) -> list[tuple[list | None, str]]:
        """Run (source, inputs) pairs in the sandbox; each gives (per-input results, hash probe) or (None, reason).

        A job lost to the backend itself ("sandbox worker lost") is retried once: that is no verdict on the task.
        """
        jobs = [self._job(src, inputs, fresh) for src, inputs in items]
        results = sandbox.run_many(jobs)
        lost = [i for i, r in enumerate(results) if r.outcome is Outcome.KILLED and "worker lost" in r.stderr]
        for i, retry in zip(lost, sandbox.run_many([jobs[i] for i in lost]) if lost else [], strict=True):
            results[i] = retry
        return [self._read(r) for r in results]

    def validity(self, tasks: Sequence[Task], sandbox: Sandbox) -> list[Verdict]:
        verdicts: list[Verdict | None] = [None] * len(tasks)
        todo = []
        for i, task in enumerate(tasks):
            reason = check_source(task.data["source"])
            if reason:
                verdicts[i] = Verdict(False, reason)
            else:
                todo.append(i)
        # two runs of every task, each in its own fresh interpreter (so each has its own random hash seed)
        items = [(tasks[i].data["source"], tasks[i].data["inputs"]) for i in todo for _ in (0, 1)]
        runs = self.run_function(items, sandbox, fresh=True)
        for k, i in enumerate(todo):
            verdicts[i] = self._judge(tasks[i], runs[2 * k], runs[2 * k + 1])
        return verdicts  # type: ignore[return-value]

    def _judge(self, task: Task, first: tuple, second: tuple) -> Verdict:
        for results, note in (first, second):
            if results is None:
                return Verdict(False, note)
            for status, value in results:
                if status != "ok":
                    return Verdict(False, "raises:" + value.split(":")[0])
                if has_address(value):
                    return Verdict(False, "address_in_repr")
        outputs = [value for _, value in first[0]]
        if len(json.dumps(outputs)) > self.max_output_chars:
            return Verdict(False, "output_too_long")
        if not all(values_equal(a, b, 0.0, 0.0) for a, (_, b) in zip(outputs, second[0], strict=False)):
            return Verdict(False, "nondeterministic")
        task.data["outputs"] = outputs
        return Verdict(True, "ok")

    def degeneracy(self, task: Task) -> str | None:
        """``constant_output`` or ``returns_input`` (module docstring), compared by value, else None."""
        outputs = task.data["outputs"]
        if all(values_equal(outputs[0], o, self.rel_tol) for o in outputs[1:]):
            return "constant_output"
        args = [ast.literal_eval(i) for i in task.data["inputs"]]
        for j in range(min(len(a) for a in args)):
            if all(values_equal(encode(a[j]), o, self.rel_tol) for a, o in zip(args, outputs, strict=True)):
                return "returns_input"
        return None

    def task_features(self, task: Task) -> dict[str, float]:
        """Size of the function and of its outputs: what a rival ranks tasks by without a model."""
        return code_features(task.data["source"], task.data["inputs"], task.data["outputs"])

    def zero_fit_score(self, task: Task) -> float | None:
        """Prefer the shorter function (declared before any data: fewer syntax nodes, less to infer)."""
        return -code_features(task.data["source"], task.data["inputs"], task.data["outputs"])["ast_nodes"]

    # solver side ------------------------------------------------------------------------------------------------
    def _hidden(self, task: Task) -> list[int]:
        return list(range(self.n_shown, self.n_inputs))

    def _examples_text(self, task: Task) -> str:
        data = task.data
        pairs = "\n".join(
            f"f({_call_args(data['inputs'][i])}) == {display(data['outputs'][i])}" for i in range(self.n_shown)
        )
        return f"A hidden Python function `f` gives these results:\n{pairs}\n\nHint: {data['message']}\n\n"

    def solver_prompt(self, task: Task) -> Prompt:
        data = task.data
        if self.mode == "induction":
            text = self._examples_text(task) + "Write the function `f` in a ```python code block."
        else:
            queries = self._hidden(task)[: self.n_query]
            calls = "\n".join(f"f({_call_args(data['inputs'][i])})" for i in queries)
            fmt = "Answer: <value>" if self.n_query == 1 else "one line per call: Answer 1: <value>, Answer 2: <value>"
            text = (
                f"Here is a Python function:\n```python\n{data['source'].rstrip()}\n```\n\nWhat does this return?\n"
                f"{calls}\n\nThink it through, then give the result as a Python literal, formatted as: {fmt}"
            )
        return Prompt(messages=[{"role": "user", "content": text}])

    def agent_context(self, task: Task, task_id: str) -> Context:
        """Induction: the agent writes ``f`` into ``solution.py`` (it may run it on the examples first); deduction:
        the default answer file (it may run the function to find the value)."""
        if self.mode != "induction":
            return super().agent_context(task, task_id)
        text = self._examples_text(task) + (
            f"You work in a shell workspace with python3. Write the function `f` into {SOLUTION_FILE} (test it on the "
            "examples if you like), then submit."
        )
        data = {"files": {}, "collect": [SOLUTION_FILE]}
        return Context(id=task_id, prompt=Prompt(messages=[{"role": "user", "content": text}]), data=data)

    def agent_grade(self, task: Task, artifacts: Sequence[dict], sandbox: Sandbox | None) -> list[bool]:
        if self.mode != "induction":
            return super().agent_grade(task, artifacts, sandbox)
        return self._grade_sources(task, [(a.get("files") or {}).get(SOLUTION_FILE) for a in artifacts], sandbox)

    def grade(self, task: Task, completions: Sequence[str], sandbox: Sandbox) -> list[bool]:
        if self.mode == "deduction":
            return [self._grade_deduction(task, c) for c in completions]
        return self._grade_sources(task, [python_code(c) for c in completions], sandbox)

    def _grade_sources(self, task: Task, codes: Sequence[str | None], sandbox: Sandbox) -> list[bool]:
        """Induction grades: each candidate source of ``f`` run on the hidden inputs, compared by value."""
        hidden = self._hidden(task)
        runnable = [i for i, code in enumerate(codes) if code and check_source(code) is None]
        runs = self.run_function([(codes[i], [task.data["inputs"][h] for h in hidden]) for i in runnable], sandbox)
        grades = [False] * len(codes)
        for i, (results, _) in zip(runnable, runs, strict=False):
            grades[i] = (
                results is not None
                and len(results) == len(hidden)  # a short result list is no pass
                and all(
                    status == "ok" and values_equal(value, task.data["outputs"][h], self.rel_tol)
                    for (status, value), h in zip(results, hidden, strict=True)
                )
            )
        return grades

    def _grade_deduction(self, task: Task, completion: str) -> bool:
        answers: dict[int, str] = {}
        for number, value in _ANSWER.findall(completion):
            answers[int(number) if number else 1] = value.strip().strip("`$*").strip()
        queries = self._hidden(task)[: self.n_query]
        for k, h in enumerate(queries, start=1):
            guess = encode_literal(answers[k]) if k in answers else None
            if guess is None or not values_equal(guess, task.data["outputs"][h], self.rel_tol):
                return False
        return True

    def topic(self, task: Task) -> str:
        return code_topic(task.data["source"])

    def render(self, task: Task) -> str:
        data = task.data
        return _format_task(data["source"], [_call_args(i) for i in data["inputs"]], data["message"])
