"""Word problem + executable expression: the CPU demo domain (raw few-shot completion, exact reference answers).

The generator continues three ``Problem: ...`` / ``Expression: ...`` examples after a final ``Problem:`` and stops
at a blank line. A task is valid iff its expression evaluates (safely, exactly) to a whole number, the reference,
and (strict, the default) solving it needs arithmetic on the problem's own quantities: not degenerate by any of
``propel.domains.math.degeneracy.REASONS`` (the answer stated in the problem, no operation, a quantity the problem
does not hold, a quantity that does not matter, a copy of a solved example the solver is shown).
The solver gets a chat prompt ending "Give the final answer as: Answer: <number>" (``solver_format="chat"``) or, for
small models, a raw few-shot prompt of solved examples ending in "Answer:" (``"few_shot"``: a number in a few tokens);
either way it is graded numerically against the reference.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from functools import cache
from importlib import resources

from propel.domains.agents import SolvedByAgents
from propel.domains.interface import AnswerText, Domain, ParseFailure, Verdict, few_shot_contexts
from propel.domains.math.answers import extract_answer, parse_number
from propel.domains.math.degeneracy import REASONS, degenerate_reasons
from propel.domains.math.expression import ExpressionError, evaluate
from propel.domains.math.features import expression_features
from propel.domains.math.topic import math_topic
from propel.records import Context, Prompt, Task
from propel.sandbox.sandbox import Sandbox

SOLVER_INSTRUCTION = "Solve the problem. Give the final answer as: Answer: <number>"
SOLVER_FORMATS = ("chat", "few_shot")
_ARITHMETIC_PREFIX = re.compile(r"[0-9\s+\-*/().^×÷%]+")


@cache
def expression_examples() -> list[dict]:
    """Few-shot (problem, expression) pairs shipped as package data."""
    return json.loads(resources.files("propel.domains").joinpath("data/math_expression_examples.json").read_text())


@cache
def solved_examples(k: int) -> str:
    """The first ``k`` shipped examples as "Problem: ... / Answer: <value of the expression>" blocks."""
    blocks = []
    for example in expression_examples()[:k]:
        value = evaluate(example["expression"])
        blocks.append(f"Problem: {example['problem']}\nAnswer: {value}\n\n")
    return "".join(blocks)


class MathExpressionDomain(Domain, SolvedByAgents):
    """Arithmetic word problems whose reference answer is an executable expression's value.

    Args:
        few_shot: examples per generator prompt.
        max_problem_chars: longer problems are invalid.
        max_abs_answer: answers larger in magnitude are invalid (keeps tasks human-sized).
        strict: degenerate tasks (``propel.domains.math.degeneracy``) are invalid (``degenerate:<reason>``); False
            keeps them valid (the lenient rule of earlier runs) and records the reason in ``info["degenerate"]``.
        lenient_expression: read the expression as its arithmetic prefix before any ``=`` (``35 + 74*3 = 95`` ->
            ``35 + 74*3``; ``2 * 10 + 1 as per ...`` -> ``2 * 10 + 1``); False requires the whole line to parse.
        solver_format: ``chat`` (an instruction, answer parsed from "Answer: <number>") or ``few_shot`` (raw text:
            ``solver_shots`` solved "Problem: ... / Answer: <number>" examples, then the task; the solver writes
            the number and stops at the line end: what a 135M model can do, in ~8 tokens instead of ~100).
        solver_shots: solved examples in a ``few_shot`` solver prompt.
    """

    name = "math_expression"
    degenerate_reasons = REASONS
    needs_sandbox = False
    generator_stop = ("\n\n",)

    cut_completions_invalid = True

    def __init__(
        self,
        few_shot: int = 3,
        max_problem_chars: int = 600,
        max_abs_answer: int = 10**9,
        lenient_expression: bool = False,
        strict: bool = True,
        solver_format: str = "chat",
        solver_shots: int = 3,
    ):
        if not 0 < few_shot <= len(expression_examples()):
            raise ValueError(
                f"MathExpressionDomain few_shot must be in 1..{len(expression_examples())}, got {few_shot}"
            )
        self.few_shot, self.max_problem_chars, self.max_abs_answer = few_shot, max_problem_chars, max_abs_answer
        self.lenient_expression, self.strict = lenient_expression, strict
        if solver_format not in SOLVER_FORMATS:
            raise ValueError(
                f"MathExpressionDomain solver_format must be one of {SOLVER_FORMATS}, got {solver_format!r}"
            )
        if solver_format == "few_shot" and not 0 < solver_shots <= len(expression_examples()):
            raise ValueError(
                f"MathExpressionDomain solver_shots must be in 1..{len(expression_examples())}, got {solver_shots}"
            )
        self.solver_format, self.solver_shots = solver_format, solver_shots
        self.solver_stop = ("\n",) if solver_format == "few_shot" else ()

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        blocks = [f"Problem: {e['problem']}\nExpression: {e['expression']}\n\n" for e in expression_examples()]
        return few_shot_contexts(self.name, n, seed, blocks, self.few_shot, "Problem:")

    def parse(self, completion: str) -> Task | ParseFailure:
        text = completion.split("\n\n")[0]
        if "Expression:" not in text:
            return ParseFailure("no_expression")
        problem, _, rest = text.partition("Expression:")
        problem, expression = problem.strip(), rest.strip().split("\n")[0].strip()
        if self.lenient_expression:
            match = _ARITHMETIC_PREFIX.match(expression.split("=")[0])
            expression = match.group(0).strip() if match else ""
        if not problem:
            return ParseFailure("empty_problem")
        if len(problem) > self.max_problem_chars:
            return ParseFailure("problem_too_long")
        if not expression:
            return ParseFailure("empty_expression")
        return Task(domain=self.name, data={"problem": problem, "expression": expression})

    def validity(self, tasks: Sequence[Task], sandbox: Sandbox | None = None) -> list[Verdict]:
        """Evaluated on the host: the AST whitelist and size bounds make the evaluation safe and bounded."""
        verdicts = []
        for task in tasks:
            try:
                value = evaluate(task.data["expression"])
            except ExpressionError as err:
                verdicts.append(Verdict(False, str(err)))
                continue
            if value.denominator != 1:
                verdicts.append(Verdict(False, "not_whole_number"))
            elif abs(value) > self.max_abs_answer:
                verdicts.append(Verdict(False, "answer_too_large"))
            else:
                task.data["answer"] = int(value)
                verdicts.append(Verdict(True, "ok"))
        return verdicts

    def degeneracy(self, task: Task) -> str | None:
        """The first of ``propel.domains.math.degeneracy.REASONS`` that applies, or None."""
        reasons = degenerate_reasons(
            task.data["problem"], task.data["expression"], task.data["answer"], self.solved_problems()
        )
        return reasons[0] if reasons else None

    def solved_problems(self) -> list[str]:
        """The problems whose answers the solver's prompt shows (its few-shot examples; none for the chat solver)."""
        if self.solver_format != "few_shot":
            return []
        return [e["problem"] for e in expression_examples()[: self.solver_shots]]

    def task_features(self, task: Task) -> dict[str, float]:
        """Answer size, operations, quantities and length: what a rival ranks valid tasks by without a model."""
        return expression_features(task.data["problem"], task.data["expression"], task.data["answer"])

    def zero_fit_score(self, task: Task) -> float | None:
        """Prefer the smaller answer (declared before any data: the 135M solver guesses small numbers)."""
        return -math.log1p(abs(task.data["answer"]))

    def solver_prompt(self, task: Task) -> Prompt:
        if self.solver_format == "few_shot":
            return Prompt(text=f"{solved_examples(self.solver_shots)}Problem: {task.data['problem']}\nAnswer:")
        return Prompt(messages=[{"role": "user", "content": f"{task.data['problem']}\n\n{SOLVER_INSTRUCTION}"}])

    def grade(self, task: Task, completions: Sequence[str], sandbox: Sandbox | None = None) -> list[bool]:
        if self.solver_format == "few_shot":  # the completion is the answer line itself
            return [parse_number(c.strip().split("\n")[0]) == task.data["answer"] for c in completions]
        return [parse_number(extract_answer(c)) == task.data["answer"] for c in completions]

    def answer_text(self, task: Task) -> AnswerText | None:
        """Few-shot solver: a right completion is `` <answer>`` followed by anything that does not extend the number
        (the shipped solved examples write `` 42`` and a newline); chat solvers reason first, so None."""
        if self.solver_format != "few_shot" or "answer" not in task.data:
            return None
        return AnswerText(prefix=f" {task.data['answer']}", extends=r"[0-9.,/]")

    def topic(self, task: Task) -> str:
        return math_topic(task.data["problem"])

    def render(self, task: Task) -> str:
        return f"Problem: {task.data['problem']}\nExpression: {task.data['expression']}"
