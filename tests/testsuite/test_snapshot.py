"""Snapshots, the data differential grading compares: values and library objects round-trip through JSON as trees,
references resolve to the same objects, a test's callables become callback tables the replaying side answers from,
and the comparison is on data (order-free dicts and sets, float tolerance, malformed trees simply unequal)."""

from __future__ import annotations

import datetime
import decimal
import json
import re
import sys
from collections import OrderedDict, namedtuple
from importlib import resources

import pytest

sys.path.insert(0, str(resources.files("propel.testsuite")))

from propel_box.snapshot import NoSnapshot, Snapshots, same  # noqa: E402

Point = namedtuple("Point", "x y")


class Box:
    """A library-like class: rebuilt from its state, as pickle would."""

    def __init__(self, items):
        self.items = list(items)

    def __eq__(self, other):
        return isinstance(other, Box) and self.items == other.items


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


def through(value, snaps=None):
    snaps = snaps or Snapshots()
    tree = json.loads(json.dumps(snaps.take(value)))
    return tree, snaps.rebuild(tree)


@pytest.mark.parametrize(
    "value",
    [
        None,
        [1, (2.5, "a"), {"k": {3, 4}}],
        b"\x00",
        Ellipsis,
        type(None),
        datetime.datetime(2024, 1, 2, 3, 4, 5),
        datetime.timedelta(days=3),
        decimal.Decimal("1.10"),
        OrderedDict(a=1),
        Point(1, 2),
        re.compile("a+", re.I),
        Box([1, 2]),
        len,
        str.upper,
        Box,
    ],
)
def test_values_and_objects_round_trip(value):
    tree, back = through(value)
    assert back == value and type(back) is type(value)
    assert same(tree, Snapshots().take(back))


def test_slots_matches_and_lazy_results():
    tree, back = through(Slotted(1, [2]))
    assert (back.a, back.b) == (1, [2])
    match = re.compile(r"(\d+)").search("ab 42 c")
    tree, back = through(match)
    assert back.span() == (3, 5) and back.group(1) == "42"
    tree, items, exhausted = Snapshots().take_iterator(iter(range(3)))
    assert items == [0, 1, 2] and exhausted and list(Snapshots().rebuild(tree)) == [0, 1, 2]
    tree, items, exhausted = Snapshots().take_iterator(iter(int, 1), limit=5)  # endless: read 5 items
    assert len(items) == 5 and not exhausted


def test_what_has_no_snapshot_is_refused():
    cycle: list = []
    cycle.append(cycle)
    with open(__file__) as handle:
        for value in (lambda x: x, cycle, handle, iter([1]), [iter([1])], sys):
            with pytest.raises(NoSnapshot):
                Snapshots().take(value)
    with pytest.raises(NoSnapshot):  # a module the rule calls a test module is never referenced
        Snapshots(test_module=lambda name: name == __name__).take(Box([1]))


def test_a_tests_callable_becomes_a_table_the_replay_answers_from():
    recording = Snapshots()

    def double(x):
        return 2 * x

    args = [recording.stand_in(a) for a in ([1, 2], double)]
    assert args[1](3) == 6 and args[1](4) == 8  # calls go through, and are kept
    tree = json.loads(json.dumps(recording.take(args)))
    assert tree[1][1] == ["cb", 0] and len(recording.tables[0]) == 2
    replay = Snapshots(tables=json.loads(json.dumps(recording.tables)))
    _, fn = replay.rebuild(tree)
    assert fn(3) == 6 and fn(4) == 8
    with pytest.raises(LookupError, match="never passed"):
        fn(5)
    nested = recording.stand_in({"Number": double})  # one level into a dict of callables
    assert recording.take(nested) == ["d", [[["s", "Number"], ["cb", 1]]]]


def test_comparison_is_on_data():
    take = Snapshots().take
    assert same(take({1: "a", 2: "b"}), take({2: "b", 1: "a"}))
    assert same(take({"x", "y", "z"}), take({"z", "y", "x"}))
    assert same(take(0.1 + 0.2), take(0.3)) and same(take(float("nan")), take(float("nan")))
    assert not same(take(1), take(1.0)) and not same(take([1, 2]), take((1, 2)))
    assert not same(take(Box([1])), take(Box([2])))
    for malformed in (None, "x", [], ["f", 3], ["d", [1]], [["s"]], ["S", [["f", "nan"], 7]]):
        assert not same(take(1), malformed)
