"""Competition-style math problems whose reference answer comes from oracle agreement.

The generator sees two example problems and writes a new one. A task is valid iff ``oracle_attempts`` oracle answers
(the paper used two models x two attempts) are all present and symbolically equivalent; that answer becomes the
reference. Solver answers are graded by symbolic equivalence.

Strict validity (the default): a task whose agreed answer is a number the problem already states, in digits or
words, is degenerate (``degenerate:answer_stated``): the solver can answer by copying it. The oracle's agreement
says the answer is well defined, not that finding it takes any work.

The oracle is always explicit: ``oracle_model`` (built on first use, so GRPO and evaluation need nothing else) or an
engine given with ``set_oracle`` (labeling passes its ``oracle`` model's engine). There is no silent fallback to the
solver or the policy: an oracle that is also the solver keeps only the tasks it agrees with itself on, which biases
the labels toward "solvable".
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Sequence
from functools import cache
from importlib import resources
from typing import Any

from propel.domains.agents import SolvedByAgents
from propel.domains.interface import Domain, ParseFailure, Verdict
from propel.domains.math.answers import extract_answer, parse_number
from propel.domains.math.degeneracy import stated_numbers
from propel.domains.math.symbolic import equivalent
from propel.domains.math.topic import math_topic
from propel.engines.engine import Engine, SamplingSpec
from propel.engines.factory import check_kind
from propel.errors import ConfigError
from propel.records import Context, Prompt, Task
from propel.sandbox.sandbox import Sandbox

SOLVER_INSTRUCTION = "Solve the problem step by step. Put the final answer in \\boxed{}."


@cache
def example_problems() -> list[dict]:
    """Example problems with answers shipped as package data."""
    return json.loads(resources.files("propel.domains").joinpath("data/math_problems.json").read_text())


class OracleMathDomain(Domain, SolvedByAgents):
    """Generated math problems; references by oracle agreement.

    Args:
        few_shot: example problems per generator prompt.
        oracle_attempts: oracle samples per task; all must agree.
        oracle_temperature: sampling temperature of the oracle.
        oracle_max_new_tokens: token budget of each oracle attempt.
        max_problem_chars: longer problems are invalid.
        oracle_model: the oracle (bundled alias, folder or hub id), built with ``oracle_engine`` on first use unless
            an engine is given with ``set_oracle``.
        oracle_engine: engine kind for ``oracle_model`` (``hf``, ``vllm``, ``vllm_server``).
        oracle_engine_kwargs: its arguments (``dtype``, ``device``, ``base_url``, ...).
        strict: degenerate tasks are invalid (``degenerate:answer_stated``); False records the reason and keeps them.
    """

    name = "math"
    degenerate_reasons = ("answer_stated",)
    needs_sandbox = False
    needs_oracle = True

    def __init__(
        self,
        few_shot: int = 2,
        oracle_attempts: int = 4,
        oracle_temperature: float = 0.7,
        oracle_max_new_tokens: int = 512,
        max_problem_chars: int = 1500,
        oracle_model: str | None = None,
        oracle_engine: str = "hf",
        oracle_engine_kwargs: dict[str, Any] | None = None,
        strict: bool = True,
    ):
        if oracle_attempts < 1:
            raise ValueError(f"OracleMathDomain oracle_attempts must be >= 1, got {oracle_attempts}")
        self.few_shot, self.oracle_attempts = few_shot, oracle_attempts
        self.oracle_temperature, self.oracle_max_new_tokens = oracle_temperature, oracle_max_new_tokens
        self.max_problem_chars = max_problem_chars
        self.oracle_model, self.oracle_kind = oracle_model, check_kind(oracle_engine)
        self.oracle_engine_kwargs = dict(oracle_engine_kwargs or {})
        self.strict = strict
        self.oracle: Engine | None = None

    def set_oracle(self, engine: Engine) -> None:
        """The engine whose agreeing answers become references."""
        self.oracle = engine

    def oracle_engine(self) -> Engine:
        """The oracle engine: the one set with ``set_oracle``, else ``oracle_model``'s (built now); a one-line
        ``ConfigError`` when neither is given."""
        if self.oracle is None and self.oracle_model is not None:
            from propel.engines.factory import make_engine

            self.oracle = make_engine(self.oracle_kind, self.oracle_model, **self.oracle_engine_kwargs)
        if self.oracle is None:
            raise ConfigError(
                "OracleMathDomain needs an explicit oracle for its reference answers: set the domain's oracle_model "
                "(or the labeling module's `oracle`), or call set_oracle(engine); the solver is not used as its own "
                "oracle"
            )
        return self.oracle

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        examples = example_problems()
        out = []
        for i in range(n):
            picks = random.Random(f"math:{seed}:{i}").sample(range(len(examples)), self.few_shot)
            shots = "\n".join(f"Problem: {examples[j]['problem']}" for j in picks)
            text = (
                f"Here are example math problems:\n{shots}\n\nWrite one new math problem with a single, well-defined "
                "final answer. Write only the problem, starting with 'Problem:'."
            )
            group = "shots-" + "-".join(str(j) for j in sorted(picks))
            out.append(
                Context(id=f"math-{seed}-{i}", prompt=Prompt(messages=[{"role": "user", "content": text}]), group=group)
            )
        return out

    def parse(self, completion: str) -> Task | ParseFailure:
        text = re.sub(r"(?is)^\s*\**problem\**\s*:\s*", "", completion.strip())
        text = re.split(r"(?im)^\s*\**(?:solution|answer)\**\s*:", text)[0].strip()
        if len(text) < 10:
            return ParseFailure("empty_problem")
        if len(text) > self.max_problem_chars:
            return ParseFailure("problem_too_long")
        return Task(domain=self.name, data={"problem": text})

    def validity(self, tasks: Sequence[Task], sandbox: Sandbox | None = None) -> list[Verdict]:
        oracle = self.oracle_engine()
        spec = SamplingSpec(
            n=self.oracle_attempts, temperature=self.oracle_temperature, max_new_tokens=self.oracle_max_new_tokens
        )
        attempts = oracle.generate([self.solver_prompt(t) for t in tasks], spec) if tasks else []
        verdicts = []
        for task, completions in zip(tasks, attempts, strict=False):
            answers = [extract_answer(c.text) for c in completions]
            if any(a is None for a in answers):
                verdicts.append(Verdict(False, "oracle_no_answer"))
            elif not all(equivalent(answers[0], a) for a in answers[1:]):
                verdicts.append(Verdict(False, "oracle_disagree"))
            else:
                task.data["answer"] = answers[0]
                verdicts.append(Verdict(True, "ok"))
        return verdicts

    def degeneracy(self, task: Task) -> str | None:
        """``answer_stated`` when the agreed answer is a number (or its magnitude) the problem states, else None."""
        answer = str(task.data.get("answer", "")).strip().strip("$")
        value = parse_number(answer) if re.fullmatch(r"[-+]?\d[\d,]*(?:\.\d+)?", answer) else None
        if value is not None and abs(value) in stated_numbers(task.data["problem"], words=True):
            return "answer_stated"
        return None

    def solver_prompt(self, task: Task) -> Prompt:
        return Prompt(messages=[{"role": "user", "content": f"{task.data['problem']}\n\n{SOLVER_INSTRUCTION}"}])

    def grade(self, task: Task, completions: Sequence[str], sandbox: Sandbox | None = None) -> list[bool]:
        out = []
        for completion in completions:
            answer = extract_answer(completion)
            out.append(answer is not None and equivalent(answer, task.data["answer"]))
        return out

    def topic(self, task: Task) -> str:
        return math_topic(task.data["problem"])

    def render(self, task: Task) -> str:
        return f"Problem: {task.data['problem']}"
