"""Snapshots, the data differential grading compares: values and library objects round-trip through JSON as trees,
references resolve to the same objects, an object with a constructor of its own is rebuilt by calling it again with
the arguments that made it (never from its private state), what a call returns is compared as a caller sees it (public
attributes, its own repr, length and items: a memo or ``__slots__`` changes nothing), a test's callables become
callback tables the replaying side answers from with a function that looks like a user's, and the comparison is on
data (order-free dicts and sets, float tolerance, malformed trees simply unequal)."""

from __future__ import annotations

import datetime
import decimal
import inspect
import json
import re
import sys
import types
from collections import OrderedDict, namedtuple
from importlib import resources

import pytest

sys.path.insert(0, str(resources.files("propel.testsuite")))

from propel_box.snapshot import NoSnapshot, Snapshots, same  # noqa: E402

Point = namedtuple("Point", "x y")


MADE = []


class Box:
    """A library-like class: rebuilt by calling it with the arguments that made it."""

    def __init__(self, items):
        MADE.append("Box")
        self.items = list(items)

    def __eq__(self, other):
        return isinstance(other, Box) and self.items == other.items


class Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


class Bag:
    """No constructor of its own: rebuilt from its attributes, each set as a caller would."""


def made(snaps, cls, *args, **kwargs):
    """``cls(*args, **kwargs)`` with its constructor call recorded, as the recorder's constructor wrapper does."""
    tree = snaps.call_tree(args, kwargs)
    obj = cls(*args, **kwargs)
    snaps.constructed(obj, tree)
    return obj


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
        len,
        str.upper,
        Box,
    ],
)
def test_values_and_objects_round_trip(value):
    tree, back = through(value)
    assert back == value and type(back) is type(value)
    assert same(tree, Snapshots().take(back))


def test_objects_are_rebuilt_by_their_own_constructors():
    snaps = Snapshots()
    box = made(snaps, Box, [1, 2])
    box.items.append(3)  # what happened after it was made is not what the constructor call says
    MADE.clear()
    tree, back = through(box, snaps)
    assert tree[0] == "new" and MADE == ["Box"] and back == Box([1, 2])
    tree, back = through(made(snaps, Slotted, 1, [2]), snaps)
    assert (back.a, back.b) == (1, [2])
    with pytest.raises(NoSnapshot, match="constructor"):  # made where no constructor was recorded
        Snapshots().take(Box([1]))
    bag = Bag()
    bag.x = 5
    assert through(bag)[1].x == 5


def test_a_repaired_class_with_slots_is_made_and_seen_as_the_clean_one(monkeypatch):
    """Replayed where the library's class has ``__slots__`` and a memo: made by its constructor, and what a caller
    sees of it (its public attribute) is the clean class's."""
    snaps = Snapshots()
    tree = json.loads(json.dumps(snaps.take(made(snaps, Box, [1]))))
    clean = snaps.observe(Box([1]))
    repaired = types.ModuleType("repaired_lib")

    class Box2:
        __slots__ = ("items", "_memo")

        def __init__(self, items):
            self.items, self._memo = list(items), {"seen": 1}

    Box2.__qualname__ = Box2.__name__ = "Box"
    Box2.__module__ = repaired.__name__
    repaired.Box = Box2
    monkeypatch.setitem(sys.modules, "repaired_lib", repaired)
    moved = json.loads(json.dumps(tree).replace(f'"{__name__}"', '"repaired_lib"'))
    back = snaps.rebuild(moved)
    assert type(back) is Box2 and back._memo == {"seen": 1}
    seen = json.loads(json.dumps(snaps.observe(back)).replace('"repaired_lib"', f'"{__name__}"'))
    assert same(seen, clean)


def test_what_a_caller_sees_leaves_private_state_out():
    class Plain:
        def __init__(self, n):
            self.n = n

        @property
        def double(self):
            return 2 * self.n

    class Memo(Plain):
        def __init__(self, n):
            super().__init__(n)
            self._cache = {n: "x"}

    for kind in (Plain, Memo):
        kind.__qualname__ = kind.__name__
        kind.__module__ = __name__
        globals()[kind.__name__] = kind
    observe = Snapshots().observe
    assert same(observe(Plain(3)), json.loads(json.dumps(observe(Plain(3)))))
    assert observe(Plain(3))[2] == ["d", [[["s", "double"], ["i", "6"]], [["s", "n"], ["i", "3"]]]]
    assert same(observe(Plain(3))[2:], observe(Memo(3))[2:])  # the memo is not seen
    assert not same(observe(Plain(3)), observe(Plain(4)))


def test_slots_matches_and_lazy_results():
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
    rule = Snapshots(test_module=lambda name: name == __name__)
    with pytest.raises(NoSnapshot):  # a module the rule calls a test module is never referenced
        rule.take(made(rule, Box, [1]))


def test_a_tests_callable_becomes_a_table_the_replay_answers_from():
    recording = Snapshots()

    def double(x):
        return 2 * x

    args = [recording.stand_in(a) for a in ([1, 2], double)]
    assert args[1](3) == 6 and args[1](4) == 8  # calls go through, and are kept
    tree = json.loads(json.dumps(recording.take(args)))
    assert tree[1][1] == ["cb", 0] and recording.tables[0][0] == ["meta", "double", "x"]
    assert len(recording.tables[0]) == 3  # its name and parameters, then a row per call
    replay = Snapshots(tables=json.loads(json.dumps(recording.tables)))
    _, fn = replay.rebuild(tree)
    assert fn(3) == 6 and fn(4) == 8 and fn(x=3) == 6
    # a user's own function to the library: its name and parameters, __main__'s, compiled from <string>, no marks
    assert (fn.__name__, fn.__qualname__, fn.__module__) == ("double", "double", "__main__")
    assert str(inspect.signature(fn)) == "(x)" and fn.__code__.co_filename == "<string>" and not vars(fn)
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
    assert not same(Snapshots().observe(Box([1])), Snapshots().observe(Box([2])))
    for malformed in (None, "x", [], ["f", 3], ["d", [1]], [["s"]], ["S", [["f", "nan"], 7]]):
        assert not same(take(1), malformed)
