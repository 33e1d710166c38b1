"""The in-sandbox package's parts on their own: plain data travels by what a value holds (not what its class claims),
the result channel refuses lines without the key, the integrity snapshot names what was rebound whatever route
reached it, and Landlock (when the kernel has it) closes the file system to a confined process for good."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from importlib import resources

import pytest

BOX = str(resources.files("propel.testsuite"))
sys.path.insert(0, BOX)

from propel_box import channel, codec, confine, integrity  # noqa: E402


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -(10**30),
        2.5,
        float("inf"),
        1 + 2j,
        "é\n",
        b"\x00\xff",
        [1, (2, "a")],
        {1: [2], "k": None},
        {1, 2},
        frozenset({"x"}),
        (),
        [],
    ],
)
def test_plain_values_round_trip_through_json(value):
    back = codec.decode(json.loads(json.dumps(codec.encode(value))))
    assert back == value and type(back) is type(value)


def test_nan_round_trips_and_subclasses_travel_as_the_builtin_they_hold():
    assert math.isnan(codec.decode(codec.encode(float("nan"))))

    class Liar(int):
        def __eq__(self, other):
            return True

        __hash__ = int.__hash__

        def __repr__(self):
            return "999"

    class Words(list):
        def __iter__(self):
            return iter(["forged"])

    assert codec.decode(codec.encode(Liar(7))) == 7 and type(codec.decode(codec.encode(Liar(7)))) is int
    assert codec.decode(codec.encode(Words([1, 2]))) == [1, 2]
    assert codec.own_equality(Liar(0), os.path.dirname(__file__) + "/")
    assert not codec.own_equality(7, os.path.dirname(__file__) + "/")


def test_numbers_and_lazy_results_travel_as_humaneval_compares_them():
    """A Fraction or Decimal arrives as itself (equal to the float it stands for), a range as a range, a lazy iterator
    as an iterator over what it yielded (equal to no list, as a generator is); a subclass's own methods are not read."""
    from decimal import Decimal
    from fractions import Fraction

    class Lying(Fraction):
        def __eq__(self, other):
            return True

    def through(value):
        return codec.decode(json.loads(json.dumps(codec.encode(value))))

    assert through(Fraction(1, 2)) == 0.5 and type(through(Fraction(1, 2))) is Fraction
    assert through(Lying(1, 3)) == Fraction(1, 3) and type(through(Lying(1, 3))) is Fraction
    assert through(Decimal("0.25")) == 0.25 and through(range(1, 9, 2)) == range(1, 9, 2)
    lazy = through(x * 2 for x in range(3))
    assert lazy != [0, 2, 4] and list(lazy) == [0, 2, 4]
    for bad in (["q", [["i", "1"], ["i", "0"]]], ["q", [["s", "1"], ["i", "2"]]], ["R", [1, 2]], ["D", 3]):
        with pytest.raises(codec.BadValue):
            codec.decode(bad)


def test_what_is_not_plain_data_is_refused_on_both_sides():
    class Anything:
        def __eq__(self, other):
            return True

    for value in (Anything(), object(), [Anything()], {"k": print}):
        with pytest.raises(codec.NotPlain):
            codec.encode(value)
    with pytest.raises(codec.NotPlain, match="too large"):
        codec.encode([[[]]], _depth=codec.MAX_DEPTH)
    for bad in (["q", 1], ["i", 5], ["l", "x"], ["d", [[["s", "k"]]]], "raw", [], ["n", 1], ["f", "x1"]):
        with pytest.raises(codec.BadValue):
            codec.decode(bad)


def test_the_channel_accepts_only_the_key_holders_lines_in_order():
    key = os.urandom(32)
    read_fd, write_fd = os.pipe()
    send = channel.writer(write_fd, key)
    send("phase", "t::a", "call", "failed")
    os.write(write_fd, b"1,phase,743a3a61,63616c6c,706173736564,00ff\n")  # a forged "passed" with a made-up MAC
    forged = channel.writer(write_fd, os.urandom(32))  # the right format, the wrong key
    forged("phase", "t::a", "call", "passed")
    send("end", "1", "0")
    os.close(write_fd)
    data = os.read(read_fd, 1 << 16)
    os.close(read_fd)
    records, refused = channel.read_records(data, key)
    assert records == [("phase", ["t::a", "call", "failed"]), ("end", ["1", "0"])]
    assert refused == 2
    replayed, refused = channel.read_records(data.split(b"\n")[0] + b"\n" + data, key)
    assert refused >= 1  # a line replayed out of sequence is refused too


def test_integrity_names_rebindings_whatever_route_reached_them():
    import builtins
    import json as target  # a module loaded before "graded code" runs

    before = integrity.snapshot()
    saved = (target.dumps, target.JSONEncoder.default, builtins.abs)
    try:
        target.json_probe = lambda: None  # a new name: importing or adding is not tampering
        target.dumps = lambda *a, **k: "{}"  # a module attribute
        target.JSONEncoder.default = lambda self, o: None  # a class attribute
        sys.modules["builtins"].abs = lambda x: 0  # a builtin, reached through sys.modules
        changed = integrity.changes(before)
    finally:
        target.dumps, target.JSONEncoder.default, builtins.abs = saved
        del target.json_probe
    assert sorted(changed) == ["builtins.abs rebound", "json.dumps rebound", "json.encoder.JSONEncoder.default rebound"]
    assert integrity.changes(before) == []  # restored: nothing left to report


CONFINED = """
import os, sys
sys.path.insert(0, {box!r})
from propel_box import confine
abi = confine.restrict(read=confine.runtime_paths() + [{ws!r}], write=[{ws!r}])
out = [str(abi)]
for path, mode in (({secret!r}, "r"), ({ws!r} + "/ok.txt", "w"), ({outside!r}, "w")):
    try:
        open(path, mode).close()
        out.append("open")
    except OSError:
        out.append("denied")
print(" ".join(out))
"""


def test_landlock_confines_the_process_for_good(tmp_path, missing):
    if confine.landlock_abi() == 0:
        missing("this kernel has no Landlock (the runners then record landlock 0)")
    ws, other = tmp_path / "ws", tmp_path / "other"
    ws.mkdir()
    other.mkdir()
    (other / "secret.txt").write_text("expected values")
    code = CONFINED.format(box=BOX, ws=str(ws), secret=str(other / "secret.txt"), outside=str(other / "new.txt"))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    abi, read_secret, write_ws, write_outside = out.split()
    assert int(abi) > 0 and read_secret == "denied" and write_ws == "open" and write_outside == "denied"
    assert not (other / "new.txt").exists()
