"""CodeDomain end to end on hand-written generations: parse, sandboxed validity, prompts, grading, topics."""

import pytest

from propel.domains.code import CodeDomain
from propel.domains.interface import ParseFailure
from propel.records import Task


def generation(source: str, inputs: list[str], message: str = "Think about it.") -> str:
    lines = "\n".join(inputs)
    return f"Sure!\n```python\n{source}```\n```input\n{lines}\n```\n```message\n{message}\n```\n"


INTS = [str(i) for i in range(10)]
GOOD = generation("def f(x):\n    return x * x + 1\n", INTS)


@pytest.fixture(scope="module")
def induction():
    return CodeDomain(mode="induction", timeout_s=3.0)


def parsed(domain, text) -> Task:
    task = domain.parse(text)
    assert isinstance(task, Task), task
    return task


def test_contexts_are_seeded_and_unique(induction):
    a, b = induction.contexts(6, seed=1), induction.contexts(6, seed=1)
    assert [c.id for c in a] == [c.id for c in b] and len({c.id for c in a}) == 6
    assert [c.prompt.messages for c in a] == [c.prompt.messages for c in b]
    assert len({c.prompt.messages[0]["content"] for c in a}) > 1  # varied few-shot examples
    assert induction.contexts(1, seed=2)[0].id != a[0].id


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("no code here", "no_code_block"),
        ("```python\ndef f(x):\n    return x\n```", "no_input_block"),
        (generation("def f(x):\n    return x\n", INTS[:7]), "too_few_inputs"),
        (generation("def f(x):\n    return x\n", ["1"] * 10), "duplicate_inputs"),
        (generation("def f(x):\n    return x\n", INTS[:9] + ["__import__('os').system('id')"]), "input_not_literal"),
        (generation("def f(x):\n    return x\n", INTS[:9] + ["1) + g(2"]), "input_not_literal"),
        (generation("def f(x):\n    return x\n", INTS, message=""), "no_message"),
    ],
)
def test_parse_failures(induction, text, reason):
    assert induction.parse(text) == ParseFailure(reason)


def test_inputs_are_canonical_literals(induction):
    task = parsed(induction, generation("def f(a, b):\n    return a\n", [f"[{i}, 2], 'x'" for i in range(10)]))
    assert task.data["inputs"][0] == "([0, 2], 'x')"


def test_validity_verdicts(induction, sandbox):
    cases = {
        "good": GOOD,
        "banned_import:os": generation("import os\ndef f(x):\n    return os.getpid() + x\n", INTS),
        "banned_call:__import__": generation("def f(x):\n    return __import__('os').getpid()\n", INTS),
        "timeout": generation("def f(x):\n    while True:\n        x += 1\n", INTS),
        "raises:ZeroDivisionError": generation("def f(x):\n    return 10 // x\n", INTS),
        "nondeterministic": generation(
            "def f(s):\n    return list(set(s.split()))\n",
            [repr(" ".join(f"w{i}{j}" for j in range(12))) for i in range(10)],
        ),
        "address_in_repr": generation("def f(x):\n    return object()\n", INTS),
    }
    tasks = [parsed(induction, text) for text in cases.values()]
    verdicts = induction.validity(tasks, sandbox)
    got = {name: (v.reason if name != "good" else v.ok) for name, v in zip(cases, verdicts, strict=True)}
    assert got == {name: (name if name != "good" else True) for name in cases}
    assert tasks[0].data["outputs"][3] == ["int", "10"]
    assert all("outputs" not in t.data for t in tasks[1:])


def test_determinism_runs_use_separate_processes(induction, sandbox):
    runs = induction.run_function([("def f(x):\n    return x\n", ["(1,)"])] * 2, sandbox, fresh=True)
    assert runs[0][0] == runs[1][0] and runs[0][1] != runs[1][1]  # same outputs, different hash seeds


def test_input_text_is_never_executed(induction, sandbox):
    """An input that looks like code stays a string: it reaches f as data."""
    inputs = [repr(f"__import__('os').system('touch /tmp/pwn{i}')") for i in range(10)]
    task = parsed(induction, generation("def f(s):\n    return len(s)\n", inputs))
    assert induction.validity([task], sandbox)[0].ok
    assert task.data["outputs"][0] == ["int", str(len("__import__('os').system('touch /tmp/pwn0')"))]


def test_induction_prompt_and_grading(induction, sandbox):
    task = parsed(induction, GOOD)
    assert induction.validity([task], sandbox)[0].ok
    prompt = induction.solver_prompt(task).messages[0]["content"]
    assert "f(4) == 17" in prompt and "f(5)" not in prompt  # shown pairs only, hidden inputs withheld
    right = "Here:\n```python\ndef f(x):\n    return x ** 2 + 1\n```"
    only_shown = "```python\ndef f(x):\n    return [1, 2, 5, 10, 17][x] if x < 5 else 0\n```"
    wrong = "```python\ndef f(x):\n    return x * 2\n```"
    hostile = "```python\nimport os\ndef f(x):\n    return x * x + 1\n```"
    assert induction.grade(task, [right, only_shown, wrong, hostile, "no code"], sandbox) == [
        True,
        False,
        False,
        False,
        False,
    ]
    assert induction.topic(task) == "math"


def test_deduction_grading(sandbox):
    domain = CodeDomain(mode="deduction")
    task = parsed(domain, generation("def f(xs):\n    return sorted(xs)[::-1]\n", [f"[{i}, 3, 1]" for i in range(10)]))
    assert domain.validity([task], sandbox)[0].ok
    prompt = domain.solver_prompt(task).messages[0]["content"]
    assert "f([5, 3, 1])" in prompt and "Answer:" in prompt
    answers = ["So the result is\nAnswer: [5, 3, 1]", "Answer: `[5, 3, 1]`", "Answer: [1, 3, 5]", "It is [5, 3, 1]"]
    assert domain.grade(task, answers, sandbox) == [True, True, False, False]
    assert domain.topic(task) == "sorting_order"
