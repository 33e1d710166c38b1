"""Reference-generated held-out inputs, without a sandbox: the candidates of every task short of held-out inputs are
unseen, new and inside the envelope of the task's own inputs; the reference's answers decide which are used; and
answers compare as the tests compare them."""

from __future__ import annotations

import math

from propel.tasks.humaneval import load_humaneval
from propel.testsuite.held_out import MIN_HELD_OUT, Envelope, candidates, same_value, usable
from propel.testsuite.neighbours import literal_calls
from propel.testsuite.shown import Shown, among, distinct_inputs

TASKS = load_humaneval()


def _short(task) -> int:
    return max(0, MIN_HELD_OUT - distinct_inputs(list(task.hidden.values()), task.entry_point))


def test_candidates_of_every_short_task_are_unseen_new_and_inside_the_envelope():
    short = [t for t in TASKS if _short(t)]
    assert len(short) > 40  # HumanEval's checks hold few inputs out once the shown ones are gone
    with_candidates = 0
    for task in short:
        visible, hidden = task.visible_calls(), task.visible_calls("hidden")
        found = candidates(visible, hidden, task.prompt, task.entry_point, task.task_id, _short(task))
        assert found == candidates(visible, hidden, task.prompt, task.entry_point, task.task_id, _short(task))
        with_candidates += bool(found)
        own = literal_calls([*visible, *hidden])
        shown, envelope = Shown.of(task.prompt, task.entry_point, literal_calls(visible)), Envelope(own)
        for args in literal_calls(found):
            assert not shown.shows(args) and not among(args, own) and envelope.holds(args), (task.task_id, args)
        assert len(set(found)) == len(found)
    assert with_candidates >= len(short) * 2 // 3


def test_the_envelope_keeps_the_task_domain():
    envelope = Envelope([("0101", "1100"), ("111", "000")])
    assert envelope.holds(("0110", "1010"))
    assert not envelope.holds(("01a1", "1100"))  # a letter in a binary string
    assert not envelope.holds(("01011", "1100"))  # longer than any string the task uses
    numbers = Envelope([([1, 5, 3], 2), ([4, 2], 7)])
    assert numbers.holds(([5, 1], 3)) and not numbers.holds(([1, 5, 3], -1)) and not numbers.holds(([9], 2))
    assert not numbers.holds(([1, 2], 2, 3))  # an argument the task never passes
    pairs = Envelope([("0101", "1100"), ("111", "000"), ("1", "0")])  # every test pairs strings of one length
    assert pairs.holds(("01", "10")) and not pairs.holds(("0101", "1"))
    ordered = Envelope([([1, 2, 5], 1), ([0, 3], 7)])  # every test's list is sorted and non-empty
    assert ordered.holds(([1, 3, 5], 2)) and not ordered.holds(([3, 1], 2)) and not ordered.holds(([], 2))


def _value(tag: str, x) -> tuple:
    return ("value", [tag, x])


def test_the_reference_decides_which_candidates_are_used():
    reference = [
        _value("i", "1"),  # the task's own input: the reference answers ints
        ("raise", "ValueError"),  # raised: outside the task's domain
        _value("s", "x"),  # another kind of answer than on the task's own inputs
        _value("f", "nan"),  # not finite (and not an int)
        _value("i", "4"),
        _value("i", "5"),
    ]
    assert usable(reference, [1, 2, 3, 4, 5], own=[0], need=2) == [4, 5]
    assert usable(reference, [1, 2, 3, 4, 5], own=[0], need=1) == [4]
    floats = [_value("f", "1.5"), _value("f", "inf"), _value("f", "2.5")]
    assert usable(floats, [1, 2], own=[0], need=2) == [2]


def test_answers_compare_as_the_tests_compare():
    assert same_value(0.1 + 0.2, 0.3) and same_value([1.0, 2.0000000001], [1.0, 2.0]) and same_value(2, 2.0)
    assert not same_value([1, 2], (1, 2))  # a list is not the tuple the reference returns, as with ==
    assert not same_value(0.31, 0.3) and not same_value("1", 1) and not same_value(None, 0)
    assert same_value({"a": [1.0]}, {"a": [1.0 + 1e-9]}) and not same_value({"a": 1}, {"b": 1})
    assert not same_value(math.nan, 1.0)
