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
import time
import types
from collections import OrderedDict, namedtuple
from collections.abc import MutableMapping
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


class Bound:
    """What reading a ``Method`` attribute gives (cachetools' ``cachedmethod`` wrapper): its instance kept private."""

    def __init__(self, obj):
        self._obj, self.n = obj, obj.n

    def __repr__(self):
        return f"Bound({self.n})"


class Method:
    """A descriptor whose read calls the function it was made with, passing the instance being read (cachetools'
    ``cachedmethod``: a test's class made with it holds a callback the recorder stands in for)."""

    def __init__(self, make):
        self.make = make

    def __set_name__(self, owner, name):
        self.name = name

    def __get__(self, obj, kind=None):
        return self if obj is None else self.make(obj)

    def __reduce__(self):
        return getattr, (Methods, self.name)


class Methods:
    """Three such attributes: each read of one read the object again, so a snapshot that read it afresh from each
    callback's arguments branched three ways per level until the stack ran out (the cachetools recording hung)."""

    def __init__(self, n):
        self.n = n


class Recent(MutableMapping):
    """A mapping whose lookup is a use (an LRU cache's: the key moves to the end), its storage private."""

    def __init__(self, pairs):
        self._data = OrderedDict(pairs)

    def __getitem__(self, key):
        self._data.move_to_end(key)
        return self._data[key]

    def __setitem__(self, key, value):
        self._data[key] = value

    def __delitem__(self, key):
        del self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)

    def __repr__(self):
        return f"Recent({list(self._data.items())})"


class KeysOnly:
    """No ``repr`` of its own: what iterating it gives is all a caller sees of its contents."""

    def __init__(self, pairs):
        self._data = dict(pairs)

    def __iter__(self):
        return iter(self._data)

    def keys(self):
        return self._data.keys()

    def __getitem__(self, key):
        return self._data[key]


class Watched:
    """An object whose public property runs a (recorded) library function."""

    size = None

    def __init__(self, n):
        self.n = n

    @property
    def double(self):
        return Watched.size(self.n)


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


@pytest.mark.timeout(60)
def test_a_read_that_leads_back_to_the_object_is_part_of_one_bounded_snapshot():
    """A descriptor read that calls a callback with the object being read (cachetools' ``cachedmethod``) ends at the
    callback's arguments: the snapshot is one bounded read, not a fresh one per callback call."""
    recording = Snapshots()
    make = recording.stand_in(lambda obj: Bound(obj))
    for name in "abc":
        method = Method(make)
        method.__set_name__(Methods, name)
        setattr(Methods, name, method)
    try:
        start = time.perf_counter()
        one, again, two = (recording.observe(Methods(n)) for n in (1, 1, 2))
        assert time.perf_counter() - start < 5
        assert same(one, again) and not same(one, two)  # what a caller reads (methods.a.n, the repr) is there
        assert one[2][1][0] == [["s", "a"], recording.observe(Bound(Methods(1)))]
        assert not recording.reading  # the snapshot is closed: the next one starts with a whole budget
        assert recording.tables[0][1:] == []  # the callback's arguments held the object being read: not keyed
        # the replaying side reads the same way: its callback is called inside the read and ends at once too
        replay = Snapshots(tables=json.loads(json.dumps(recording.tables)))
        for name in "abc":
            setattr(Methods, name, Method(replay.rebuild(["cb", 0])))
            getattr(Methods, name).__set_name__(Methods, name)
        start = time.perf_counter()
        seen = replay.observe(Methods(1))
        assert time.perf_counter() - start < 5
        assert seen[2][1][0] == [["s", "a"], ["raise", "builtins", "LookupError"]]
    finally:
        for name in "abc":
            delattr(Methods, name)


def test_a_snapshots_reads_are_not_recorded_as_calls():
    """A property that runs a target while an object is read is part of reading it: the recorder lets that call
    pass (the suite's own call of the target is kept)."""
    from propel.sandbox import processes

    sys.modules.setdefault("propel_box.processes", processes)  # shipped into the package as box_files() does
    from propel_box.record_runner import Recorder

    snaps = Snapshots()
    recorder = Recorder(snaps)
    Watched.size = staticmethod(recorder.wrap(f"{__name__}:double:call", lambda n: 2 * n))
    try:
        seen = snaps.observe(Watched(3))
        assert seen[2] == ["d", [[["s", "double"], ["i", "6"]], [["s", "n"], ["i", "3"]]]]
        assert recorder.records[f"{__name__}:double:call"] == []
        assert Watched.size(4) == 8 and len(recorder.records[f"{__name__}:double:call"]) == 1
    finally:
        Watched.size = None


def test_a_mapping_is_read_without_its_own_lookup():
    """An LRU-like mapping is not used by being read (no lookup: its order stays), its contents still show where it
    shows them (its repr); a dict subclass gives its values from the dict itself; another mapping its keys."""
    observe = Snapshots().observe
    recent = Recent([(1, "a"), (2, "b")])
    seen = observe(recent)
    assert list(recent) == [1, 2]  # no key was moved to the end
    assert seen[5] == ["l", [["i", "1"], ["i", "2"]]] and seen[4] == ["i", "2"]
    assert same(seen, observe(Recent([(1, "a"), (2, "b")])))
    assert not same(seen, observe(Recent([(1, "a"), (2, "c")])))  # another value: its repr shows it
    assert observe(OrderedDict(a=1))[0] == "r"  # a dict subclass with a reducer of its own is rebuilt as pickle does

    class Counted(dict):
        pass

    Counted.__qualname__, Counted.__module__ = "Counted", __name__
    globals()["Counted"] = Counted
    assert observe(Counted(a=1))[5] == ["l", [["l", [["s", "a"], ["i", "1"]]]]]
    assert not same(observe(Counted(a=1)), observe(Counted(a=2)))
    assert observe(KeysOnly({"a": 1}))[5] == ["l", [["s", "a"]]]  # keys only: its values are its lookup's
