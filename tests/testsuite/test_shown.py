"""What a task shows, decided by value: every spelling of a shown input is the same input, a held-out test of none of
the 164 HumanEval tasks calls the function with an input its prompt or visible tests show, and nothing of the
benchmark's tests is lost by the split."""

from __future__ import annotations

import pytest

from propel.tasks.humaneval import load_humaneval
from propel.tasks.humaneval.tasks import humaneval_rows, split_check
from propel.testsuite.shown import Shown, body_inputs, distinct_inputs, prompt_calls, split_unseen

TASKS = load_humaneval()
BY_ID = {t.task_id: t for t in TASKS}


def _spellings(name: str, args: tuple, out: object) -> list[str]:
    """One example written the ways docstrings write them (spacing, quotes, arrows, doctest, prose)."""
    plain = ", ".join(repr(a) for a in args)
    tight = ",".join(repr(a).replace(", ", ",") for a in args)
    double = ", ".join(repr(a).replace("'", '"') if '"' not in repr(a) else repr(a) for a in args)
    return [
        f"    >>> {name}({plain})\n    {out!r}\n",
        f"    {name}( {tight} ) ➞ {out!r}\n",
        f"    {name}({double}) == {out!r}\n",
        f"    {name}(\n        {plain}\n    ) -> {out!r}\n",
        f"    Example: {name}({plain}) should return {out!r}.\n",
    ]


def _inputs(task) -> list[tuple]:
    return [a for body in [*task.visible.values(), *task.hidden.values()] for a in body_inputs(body, task.entry_point)]


CASES = [(t.task_id, args) for t in TASKS[::7] for args in _inputs(t)[:2] if args is not None]


@pytest.mark.parametrize("task_id, args", CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_every_spelling_of_an_example_shows_the_same_input(task_id, args):
    """Generated variants: each test input of every seventh task, written into a docstring five ways, is shown,
    and the evaluated arguments are what is compared."""
    task = BY_ID[task_id]
    for text in _spellings(task.entry_point, args, 0):
        prompt = f'def {task.entry_point}(*args):\n    """Examples:\n{text}    """\n'
        assert args in prompt_calls(prompt, task.entry_point), text
        assert Shown.of(prompt, task.entry_point).shows(args), text


def test_literal_values_in_prose_and_keyword_examples_are_shown():
    prompt = (
        'def f(arr, k):\n    """Sum the first k items of arr.\n\n    Example:\n'
        "        Input: arr = [111,21,3,4000,5], k = 4\n        Output: 24\n\n"
        '    The list may also be "abc" or (1, 2).\n'
        + "    Items are whole numbers; the sum counts only items with at most two digits, as the example shows.\n" * 2
        + '    Constraints: 1 <= k <= 100\n    """\n'
    )
    shown = Shown.of(prompt, "f")
    assert shown.shows(([111, 21, 3, 4000, 5], 4))  # an example written as inputs, not as a call
    assert shown.shows(("abc",)) and shown.shows(((1, 2),)) and shown.shows((100,))  # single values in prose
    assert not shown.shows(([111, 21, 3, 4000, 5], 5))  # not that pair
    assert not shown.shows((4, 100))  # small numbers far apart in the prose are no example
    assert not shown.shows(([1, 2],)) and not shown.shows(("",))  # the docstring's own quotes are no string


def test_no_held_out_test_of_any_task_calls_a_shown_input():
    """All 164 tasks: every held-out input is unseen; the tests that repeated one moved to the visible suite, so the
    benchmark's tests are all still there, each exactly once."""
    rows = {r["task_id"]: r for r in humaneval_rows()}
    moved = 0
    for task in TASKS:
        seen = [a for b in task.visible.values() for a in body_inputs(b, task.entry_point) if a is not None]
        shown = Shown.of(task.prompt, task.entry_point, seen)
        for body in task.hidden.values():
            assert not any(shown.shows(a) for a in body_inputs(body, task.entry_point) if a), (task.task_id, body)
        _, bodies = split_check(rows[task.task_id]["test"])
        assert sorted([*task.visible.values(), *task.hidden.values()]) == sorted(bodies), task.task_id
        moved += len(task.visible) - max(1, -(-len(bodies) // 3))
    assert moved > 100  # the split did move tests: HumanEval's checks repeat their docstrings often


def test_a_repeated_example_joins_the_visible_tests():
    task = BY_ID["HumanEval/12"]  # longest: its docstring shows longest([]) and two lists
    prompt = task.prompt
    hidden = ["assert candidate([]) == None", "assert candidate(['x', 'yyy']) == 'yyy'"]
    visible, held = split_unseen(["assert candidate(['a']) == 'a'"], hidden, prompt, task.entry_point)
    assert held == ["assert candidate(['x', 'yyy']) == 'yyy'"] and visible[-1] == "assert candidate([]) == None"


def test_distinct_inputs_compare_by_value_and_count_computed_ones_once():
    bodies = [
        "assert candidate(1, 2) == 3",
        "assert candidate( 1,2 ) == 3",
        "assert candidate(1.0, 2) == 3",  # equal by value to (1, 2)
        "for x in range(5):\n    assert candidate(x, x) == 2 * x",
        "assert candidate(2, 2) == 4",
    ]
    assert distinct_inputs(bodies, "f") == 3
    assert body_inputs("assert f(1) == candidate(2)", "f") in ([(1,), (2,)], [(2,), (1,)])
