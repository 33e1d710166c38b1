"""Strict validity: a generated task that needs none of its domain's work is invalid (``degenerate:<why>``), through
the one scorer GRPO, labeling and evaluation share; honest tasks of the same surface form stay valid.

Each class of degenerate task is written as a family (several templates, nouns and numbers), not as single
sentences: the rule is tried on variants no one listed.
"""

from __future__ import annotations

import itertools
import random

import pytest

from propel.domains import CodeDomain, LetterCountingDomain, MathExpressionDomain, OracleMathDomain
from propel.domains.interface import DEGENERATE, is_degenerate, lenient_valid
from propel.domains.letter_counting import letter_examples
from propel.domains.math.degeneracy import REASONS
from propel.domains.math.expression_domain import expression_examples
from propel.records import Sample, Task
from propel.rollouts.scorer import GeneratorScorer

NOUNS = ["dolphins", "marbles", "apples", "students", "cars", "books"]
PLACES = ["a pool", "a jar", "a basket", "a class", "a garage", "a shelf"]
WORDS = {3: "three", 5: "five", 7: "seven", 12: "twelve", 25: "twenty-five", 40: "forty"}


def scored(domain, completions: list[str], sandbox=None) -> list[Sample]:
    samples = [Sample(prompt="", completion=c) for c in completions]
    GeneratorScorer(domain, sandbox).score(samples)
    return samples


def math_completion(problem: str, expression: str) -> str:
    return f" {problem}\nExpression: {expression}"


def _numbers(rng, k):
    return rng.sample(range(3, 60), k)


def degenerate_math(reason: str, n: int = 12, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (problem, expression) pairs that are degenerate for ``reason`` (and valid under the lenient rule)."""
    rng, out = random.Random(f"{reason}:{seed}"), []
    for noun, place in itertools.islice(itertools.cycle(zip(NOUNS, PLACES, strict=True)), n):
        a, b, c = _numbers(rng, 3)
        if reason == "answer_stated":  # the result is a number the problem states, in digits or in words
            word = rng.choice(list(WORDS))
            out.append(
                rng.choice(
                    [
                        (
                            f"There are {a} {noun} in {place} and {b} more outside. {b} leave. How many {noun} are in "
                            f"{place}?",
                            f"{a} + {b} - {b}",
                        ),
                        (f"There are {WORDS[word]} {noun} in {place}. How many {noun} are there?", f"{word}"),
                        (f"{a} {noun} sit in {place}. {b} more come and {b} go. How many now?", f"({a} * {b}) / {b}"),
                    ]
                )
            )
        elif reason == "no_operation":  # a bare number (a sign is no operation) that the problem does not state
            out.append((f"Some {noun} are in {place}. How many {noun} are there?", rng.choice([f"{a}", f"-({b})"])))
        elif reason == "ungrounded_number":
            out.append((f"Sam has {a} {noun}. He buys some more. How many does he have?", f"{a} + {c + 60}"))
        elif reason == "inert_quantity":  # b cancels out: the answer does not depend on it
            out.append(
                (
                    f"There are {a} {noun}, {b} boxes and {c} bags. How many {noun} per bag if each box is emptied?",
                    f"({a} + {b} - {b}) * {c}",
                )
            )
        elif reason == "solved_example":
            example = expression_examples()[rng.randrange(2)]
            out.append((example["problem"], example["expression"]))
    return out  # fmt: skip


def honest_math(n: int = 12, seed: int = 0) -> list[tuple[str, str]]:
    """The same surface forms with an operation on the problem's own quantities and an answer it does not state."""
    rng, out = random.Random(f"honest:{seed}"), []
    for noun, place in itertools.islice(itertools.cycle(zip(NOUNS, PLACES, strict=True)), n):
        a, b, c = _numbers(rng, 3)
        forms = [
            (f"There are {a} {noun} in {place} and {b} more outside. How many {noun} are there?", f"{a} + {b}"),
            (f"There are {c} rows of {a} {noun} in {place}. How many {noun} are there?", f"{c} * {a}"),
            (f"A worker packs {a} {noun} every hour for five hours. How many {noun} does she pack?", f"{a} * 5"),
            (f"Sam works {c} hours. How many minutes does he work?", f"{c} * 60"),
            (f"There are {a * 4} {noun} shared equally by four friends. How many does each get?", f"{a * 4} / 4"),
        ]
        problem, expression = forms[rng.randrange(len(forms))]
        if str(eval(expression.replace("/", "//"))) in problem:  # noqa: S307 - our own arithmetic; keep honest
            continue
        out.append((problem, expression))
    return out


@pytest.mark.parametrize("reason", REASONS)
def test_each_degenerate_math_family_is_invalid_under_its_reason(reason):
    domain = MathExpressionDomain(solver_format="few_shot")
    pairs = degenerate_math(reason)
    samples = scored(domain, [math_completion(p, e) for p, e in pairs])
    assert [s.info["reason"] for s in samples] == [DEGENERATE + reason] * len(pairs), pairs
    assert not any(s.valid for s in samples)
    assert all(lenient_valid(s.valid, s.info["reason"]) and "answer" in s.task.data for s in samples)


def test_honest_math_of_the_same_surface_form_stays_valid():
    domain = MathExpressionDomain(solver_format="few_shot")
    pairs = honest_math(30)
    samples = scored(domain, [math_completion(p, e) for p, e in pairs])
    assert [s.info["reason"] for s in samples] == ["ok"] * len(pairs), pairs


def test_every_shipped_example_is_strictly_valid():
    """The generator imitates its examples: a degenerate example would teach degeneracy (few-shot solver aside,
    whose own solved examples are degenerate for it by definition)."""
    samples = scored(
        MathExpressionDomain(), [math_completion(e["problem"], e["expression"]) for e in expression_examples()]
    )
    assert [s.info["reason"] for s in samples] == ["ok"] * len(samples)


def test_lenient_domain_keeps_degenerate_tasks_and_records_why():
    domain = MathExpressionDomain(strict=False)
    (sample,) = scored(domain, [" There are 10 dolphins. How many dolphins are there?\nExpression: 10"])
    assert sample.valid and sample.info["reason"] == "ok" and sample.info["degenerate"] == "answer_stated"


def test_the_answer_stated_in_words_and_in_digits_with_separators():
    domain = MathExpressionDomain()
    cases = [
        (" A farm has twenty-five cows and 5 pigs. 5 pigs are sold. How many cows?\nExpression: 25 + 5 - 5", True),
        (" A city has 1,200 cars and 3 buses. 3 buses leave. How many cars?\nExpression: 1200 * 3 / 3", True),
        (" A city has 1,200 cars and 3 buses. How many vehicles?\nExpression: 1200 + 3", False),
    ]
    samples = scored(domain, [c for c, _ in cases])
    assert [is_degenerate(s.info["reason"]) for s in samples] == [d for _, d in cases]


def test_letter_counting_degenerate_families_and_honest_neighbours():
    domain = LetterCountingDomain(solver_shots=3)
    solved = letter_examples()[-1]
    degenerate = {
        "letter_absent": [" z\nText: apple pie", " q\nText: the brown dog", " x\nText: morning walk"],
        "only_letter": [" a\nText: a", " e\nText: ee eee", " o\nText: oo"],
        "solved_example": [f" {solved['letter']}\nText: {solved['text']}"],
    }
    for reason, completions in degenerate.items():
        samples = scored(domain, completions)
        assert [s.info["reason"] for s in samples] == [DEGENERATE + reason] * len(completions)
    honest = scored(domain, [" r\nText: strawberry fields", " e\nText: Every tree", " a\nText: a cat"])
    assert all(s.valid for s in honest)


def test_oracle_math_answer_stated():
    domain = OracleMathDomain()
    stated = Task("math", {"problem": "There are 12 eggs in a box. How many eggs are in the box?", "answer": "12"})
    honest = Task("math", {"problem": "There are 12 eggs in 3 boxes. How many eggs are in all?", "answer": "36"})
    symbolic = Task("math", {"problem": "Simplify (x+1)^2 - 1 for x = 2.", "answer": "x^2 + 2x"})
    assert [domain.degeneracy(t) for t in (stated, honest, symbolic)] == ["answer_stated", None, None]


def _generation(source: str, inputs: list[str]) -> str:
    lines = "\n".join(inputs)
    return f"```python\n{source}```\n```input\n{lines}\n```\n```message\nThink.\n```\n"


def test_code_constant_and_input_returning_functions_are_degenerate(sandbox):
    domain = CodeDomain(mode="deduction", timeout_s=5.0)
    ints = [str(i) for i in range(10)]
    pairs = [f"{i}, 'w{i}'" for i in range(10)]
    cases = {
        "constant_output": [
            _generation("def f(x):\n    return 7\n", ints),
            _generation("def f(x):\n    return len(str(x)) * 0 + 3\n", ints),
            _generation("def f(x, s):\n    return sorted([1, 2])\n", pairs),
        ],
        "returns_input": [
            _generation("def f(x):\n    return x\n", ints),
            _generation("def f(x):\n    y = x * 2\n    return y // 2\n", ints),
            _generation("def f(n, s):\n    return s.upper().lower()\n", pairs),
        ],
        "ok": [
            _generation("def f(x):\n    return x * x + 1\n", ints),
            _generation("def f(n, s):\n    return s * n\n", pairs),
            _generation("def f(x):\n    return x % 3\n", ints),
        ],
    }
    for reason, completions in cases.items():
        samples = scored(domain, completions, sandbox)
        expected = "ok" if reason == "ok" else DEGENERATE + reason
        assert [s.info["reason"] for s in samples] == [expected] * len(completions)
