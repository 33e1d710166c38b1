"""Plain data across the process boundary of value grading: what a candidate returned, as tagged JSON.

``encode`` runs in the graded child. It reads a value through its builtin base type's own C methods
(``int.__repr__``, ``str.__str__``, ``list.__len__``/``__getitem__``, ``dict.items``), never through methods the
value's class may override, so an ``int`` subclass travels as the integer it holds and an object whose ``__eq__``
answers True to everything travels as nothing at all (``NotPlain``). ``decode`` runs in the trusted runner and builds
exact builtin values (``type(v) is int``) from the tags, and the few standard-library values HumanEval's harness
compares as Python does (a ``Fraction``, a ``Decimal``, a ``range``, a list iterator standing for a lazy result),
built by the runner itself; anything else is refused. The child is untrusted, so ``encode`` is a convenience, not a
guarantee: the guarantee is that ``decode`` can only ever produce plain data whose equality is the runtime's own.
"""

import base64
import decimal
import fractions
import sys

MAX_DEPTH = 64
MAX_ITEMS = 1_000_000


class NotPlain(TypeError):
    """The value is not made of builtin plain-data types."""


_SCALARS = (bool, int, float, complex, str, bytes)
_CONTAINERS = (list, tuple, dict, set, frozenset)


def _base(value):
    for kind in (bool, *_SCALARS[1:], *_CONTAINERS):
        if isinstance(value, kind):
            return kind
    return None


def encode(value, _depth=0, _budget=None):
    """Tagged JSON-able form of ``value``: ``["n"]``, ``["b", bool]``, ``["i", "digits"]``, ``["f", "repr"]``,
    ``["c", [re, im]]``, ``["s", str]``, ``["y", base64]``, ``["l"|"t"|"S"|"F", [items]]``, ``["d", [[k, v], ..]]``,
    ``["q", [num, den]]`` (Fraction), ``["D", str]`` (Decimal), ``["R", [start, stop, step]]``, ``["it", [items]]``.
    Raises ``NotPlain`` naming the first value that is not plain data."""
    budget = _budget if _budget is not None else [MAX_ITEMS]
    budget[0] -= 1
    if budget[0] < 0 or _depth > MAX_DEPTH:
        raise NotPlain("the value is too large or too deeply nested")
    if value is None:
        return ["n"]
    kind = _base(value)
    if kind is None:
        return _number_or_lazy(value, _depth, budget)
    if kind is bool:
        return ["b", bool(value)]  # bool cannot be subclassed
    if kind is int:
        try:
            return ["i", int.__repr__(value)]
        except ValueError as e:  # more digits than the interpreter converts
            raise NotPlain(str(e)) from e
    if kind is float:
        return ["f", float.__repr__(value)]
    if kind is complex:
        return ["c", [float.__repr__(complex.real.__get__(value)), float.__repr__(complex.imag.__get__(value))]]
    if kind is str:
        return ["s", str.__str__(value)]
    if kind is bytes:
        return ["y", base64.b64encode(bytes(memoryview(value))).decode("ascii")]
    if kind in (list, tuple):
        size = kind.__len__(value)
        items = [encode(kind.__getitem__(value, i), _depth + 1, budget) for i in range(size)]
        return ["l" if kind is list else "t", items]
    if kind is dict:
        return ["d", [[encode(k, _depth + 1, budget), encode(v, _depth + 1, budget)] for k, v in dict.items(value)]]
    tag = "S" if kind is set else "F"
    return [tag, [encode(v, _depth + 1, budget) for v in kind.__iter__(value)]]


def _number_or_lazy(value, depth, budget):
    """The other values HumanEval's harness compares as Python does: a ``Fraction`` or ``Decimal`` (equal to the
    float it stands for), a ``range``, and a lazy iterator a test consumes (``tuple(candidate(x))``), read here once
    (it stays lazy on the other side: equal to no list, as a generator is)."""
    for fraction in _kinds(fractions, "Fraction"):
        if isinstance(value, fraction):
            numerator, denominator = fraction.numerator.fget(value), fraction.denominator.fget(value)
            return ["q", [encode(int(numerator), depth + 1, budget), encode(int(denominator), depth + 1, budget)]]
    for number in _kinds(decimal, "Decimal"):
        if isinstance(value, number):
            return ["D", number.__str__(value)]
    if isinstance(value, range):
        return ["R", [range.start.__get__(value), range.stop.__get__(value), range.step.__get__(value)]]
    kind = type(value)
    if hasattr(kind, "__next__") and getattr(kind, "__iter__", None) is not None:
        items = []
        for item in value:
            items.append(encode(item, depth + 1, budget))
        return ["it", items]
    raise NotPlain(f"a {kind.__module__}.{kind.__qualname__} is not plain data")


def _kinds(module, name):
    """``module.name`` as this module imported it and as graded code did (a graded child takes its own imports out of
    ``sys.modules``, so graded code's ``import fractions`` makes another copy of a pure-Python class)."""
    own = getattr(module, name)
    current = getattr(sys.modules.get(module.__name__), name, None)
    return (own,) if current is own or not isinstance(current, type) else (own, current)


def own_equality(value, graded_dir):
    """Whether ``value``'s class takes its ``==`` from code under ``graded_dir`` (the model's own ``__eq__``)."""
    for cls in type(value).__mro__:
        eq = cls.__dict__.get("__eq__") or cls.__dict__.get("__ne__")
        code = getattr(eq, "__code__", None)
        if code is not None:
            return code.co_filename.startswith(graded_dir)
    return False


def _int(value):
    if type(value) is not int:
        raise BadValue("a fraction's parts must be integers")
    return value


class BadValue(ValueError):
    """The tagged form is malformed (a child that does not speak the protocol)."""


def decode(data, _depth=0):
    """The plain value a tagged form stands for (exact builtin types only); raises ``BadValue`` otherwise."""
    if _depth > MAX_DEPTH or not isinstance(data, list) or not data or not isinstance(data[0], str):
        raise BadValue("not a tagged value")
    tag, rest = data[0], data[1:]
    try:
        if tag == "n" and not rest:
            return None
        (payload,) = rest
        if tag == "b" and type(payload) is bool:
            return payload
        if tag == "i" and type(payload) is str:
            return int(payload)
        if tag == "f" and type(payload) is str:
            return float(payload)
        if tag == "c" and type(payload) is list and len(payload) == 2:
            return complex(float(payload[0]), float(payload[1]))
        if tag == "s" and type(payload) is str:
            return payload
        if tag == "y" and type(payload) is str:
            return base64.b64decode(payload, validate=True)
        if tag in ("l", "t", "S", "F") and type(payload) is list:
            items = [decode(v, _depth + 1) for v in payload]
            return {"l": list, "t": tuple, "S": set, "F": frozenset}[tag](items)
        if tag == "q" and type(payload) is list and len(payload) == 2:
            return fractions.Fraction(_int(decode(payload[0], _depth + 1)), _int(decode(payload[1], _depth + 1)))
        if tag == "D" and type(payload) is str:
            return decimal.Decimal(payload)
        if tag == "R" and type(payload) is list and len(payload) == 3 and all(type(v) is int for v in payload):
            return range(*payload)
        if tag == "it" and type(payload) is list:
            return iter([decode(v, _depth + 1) for v in payload])
        if tag == "d" and type(payload) is list:
            out = {}
            for pair in payload:
                if type(pair) is not list or len(pair) != 2:
                    raise BadValue("a dict item is not a pair")
                out[decode(pair[0], _depth + 1)] = decode(pair[1], _depth + 1)
            return out
    except (ValueError, TypeError, OverflowError, ZeroDivisionError, ArithmeticError) as e:
        raise BadValue(f"malformed {tag!r} value: {e}") from e
    raise BadValue(f"unknown tag {tag!r}")
