"""Value comparison of encoded outputs: NaN, tolerance, order-free containers, whole long outputs."""

from propel.domains.code.harness import encode
from propel.domains.code.values import display, encode_literal, has_address, values_equal


def eq(a, b, rel_tol=1e-6, abs_tol=1e-9):
    return values_equal(encode(a), encode(b), rel_tol, abs_tol)


def test_numbers():
    assert eq(float("nan"), float("nan"))
    assert not eq(float("nan"), 1.0)
    assert eq(0.1 + 0.2, 0.3)
    assert not eq(0.1 + 0.2, 0.3, rel_tol=0.0, abs_tol=0.0)
    assert eq(2, 2.0)
    assert not eq(10**30, 10**30 + 1)  # big ints compare exactly
    assert not eq(True, 1)


def test_containers():
    assert eq({1, 2, 3}, {3, 2, 1})
    assert eq({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1})
    assert not eq([1, 2], (1, 2))
    assert not eq([1, 2], [2, 1])
    assert eq([float("nan"), 1], [float("nan"), 1])


def test_long_outputs_compared_whole():
    a = "x" * 100_000
    assert eq(a, a)
    assert not eq(a, a[:-1] + "y")


def test_addresses_and_display():
    assert has_address(encode([object()]))
    assert not has_address(encode(["0x7fffabcd1234"]))  # a string is data, not a repr
    assert display(encode({"a": (1,), "b": [1.5, None]})) == "{'a': (1,), 'b': [1.5, None]}"
    assert values_equal(encode_literal("[1, 2.0, 'x']"), encode([1, 2, "x"]))
    assert values_equal(encode_literal("nan"), encode(float("nan")))
    assert encode_literal("__import__('os')") is None
