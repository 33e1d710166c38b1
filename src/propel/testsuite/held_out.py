"""More held-out inputs for a task that holds too few out: near the task's own inputs, unseen, answered by the
reference solution in the sandbox.

A task whose held-out tests call the function with fewer than ``MIN_HELD_OUT`` distinct inputs (once the shown ones
are gone, ``propel.testsuite.shown``) pays on one or two answers: a guess, a constant or a branch per example earns
the whole reward by luck. Such a task gets inputs near its own (the hard-coding check's perturbations,
``neighbours.near_inputs``, of the visible and held-out inputs, in strict mode: made of the task's own material, a
number replaced by another its tests use, whole words or items dropped, repeated, swapped or replaced, never a
character or a number made up, so a stated shape such as balanced brackets survives), kept only when they are
unseen (not shown, not an input the task already tests) and inside the envelope of the task's inputs at each
argument (numbers within the range the tests use, strings made of the characters they use, containers as long as
theirs), so that an honest solution of the task as stated answers them as the reference does. The reference's
answers are computed in the sandbox; an input where the reference raises, or answers with another kind of value than
it gives on the task's own inputs, or with a float that is not finite, is dropped. Answers are compared as the tests
compare them: Python's ``==``, floats within 1e-6.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from propel.testsuite.neighbours import literal_calls, near_inputs
from propel.testsuite.propel_box import codec
from propel.testsuite.shown import Shown, among

MIN_HELD_OUT = 3
"""Distinct held-out inputs a task must have. With fewer a pass rate has at most three levels and a constant or a
coin flip passes all of them often (a predicate's constant passes two balanced inputs one time in four); three is
the fewest that 51 of HumanEval's tasks reach with one reference-generated input, keeping the original tests the
bulk of what pays."""
CANDIDATES_PER_INPUT = 4
"""Candidates proposed per missing input (the reference refuses some)."""
FLOAT_TOLERANCE = 1e-6


def _scalars(value, depth: int, out: dict) -> None:
    """The numbers, characters and container lengths (per depth) a value holds."""
    if depth > 6:
        return
    if isinstance(value, bool):
        out.setdefault("bools", set()).add(value)
    elif isinstance(value, int | float):
        out.setdefault("numbers", []).append(value)
    elif isinstance(value, str):
        out.setdefault("chars", set()).update(value)
        out.setdefault(("len", depth), []).append(len(value))
    elif isinstance(value, list | tuple | set | frozenset | dict):
        out.setdefault(("len", depth), []).append(len(value))
        items = [x for kv in value.items() for x in kv] if isinstance(value, dict) else value
        for item in items:
            _scalars(item, depth + 1, out)


def _sorted(value, reverse: bool) -> bool:
    try:
        return list(value) == sorted(value, reverse=reverse)
    except TypeError:
        return False


def _distinct(value) -> bool:
    try:
        return len(set(value)) == len(value)
    except TypeError:
        return False


def features(args: tuple) -> set[tuple]:
    """The shape properties an input has, from a fixed catalogue: sized arguments of equal length, numbers in order,
    a sequence sorted (either way) or of distinct items, an argument non-empty."""
    out: set[tuple] = set()
    sized = [i for i, a in enumerate(args) if isinstance(a, str | list | tuple)]
    numbers = [i for i, a in enumerate(args) if isinstance(a, int | float) and not isinstance(a, bool)]
    for k, i in enumerate(sized):
        out |= {("len=", i, j) for j in sized[k + 1 :] if len(args[i]) == len(args[j])}
        if len(args[i]):
            out.add(("nonempty", i))
        if isinstance(args[i], list | tuple):
            out |= {(name, i) for name, rev in (("asc", False), ("desc", True)) if _sorted(args[i], rev)}
            if _distinct(args[i]):
                out.add(("distinct", i))
    for k, i in enumerate(numbers):
        out |= {("<=", i, j) for j in numbers[k + 1 :] if args[i] <= args[j]}
        out |= {(">=", i, j) for j in numbers[k + 1 :] if args[i] >= args[j]}
    return out


class Envelope:
    """What the task's own inputs hold at each argument position, and the shape properties they all share: an input
    outside it may be outside the task's domain (a negative count, a letter in a binary string, a list longer than
    any the task speaks of, two strings of different lengths where every test pairs equal ones, an unsorted list
    where every test's is sorted)."""

    def __init__(self, inputs: Sequence[tuple]) -> None:
        self.positions: dict[int, dict] = {}
        for args in inputs:
            for i, value in enumerate(args):
                _scalars(value, 0, self.positions.setdefault(i, {}))
        shared = [features(args) for args in inputs]
        self.shared = set.intersection(*shared) if len(shared) >= 2 else set()

    def holds(self, args: tuple) -> bool:
        if not self.shared <= features(args):
            return False
        for i, value in enumerate(args):
            pool = self.positions.get(i)
            if pool is None:
                return False
            mine: dict = {}
            _scalars(value, 0, mine)
            numbers = pool.get("numbers", [])
            if mine.get("numbers") and not (numbers and min(numbers) <= min(mine["numbers"])):
                return False
            if mine.get("numbers") and max(mine["numbers"]) > max(numbers):
                return False
            if not mine.get("chars", set()) <= pool.get("chars", set()):
                return False
            for key, lengths in mine.items():
                if isinstance(key, tuple) and key[0] == "len":
                    seen = pool.get(key)
                    if not seen or not min(seen) <= min(lengths) <= max(lengths) <= max(seen):
                        return False
        return True


def candidates(
    visible_calls: Sequence[str],
    hidden_calls: Sequence[str],
    prompt: str,
    entry_point: str,
    seed: str,
    need: int,
) -> list[str]:
    """Argument lists (source, as ``visible_calls`` spells them: ``"[1, 2], 3"``) that may become held-out inputs:
    near the visible and held-out inputs, unseen, inside their envelope; at most ``CANDIDATES_PER_INPUT * need``, in
    a deterministic order."""
    if need <= 0:
        return []
    visible, hidden = literal_calls(visible_calls), literal_calls(hidden_calls)
    inputs = [*visible, *hidden]
    if not inputs:
        return []
    shown, envelope = Shown.of(prompt, entry_point, visible), Envelope(inputs)
    out: list[str] = []
    kept: list[tuple] = []
    for _, args in near_inputs(inputs, f"held-out {seed}", strict=True):
        if shown.shows(args) or among(args, hidden) or among(args, kept) or not envelope.holds(args):
            continue
        kept.append(args)
        out.append(", ".join(repr(a) for a in args))
        if len(out) >= CANDIDATES_PER_INPUT * need:
            break
    return out


def _finite(tagged) -> bool:
    if not isinstance(tagged, list) or not tagged:
        return False
    if tagged[0] == "f":
        return math.isfinite(float(tagged[1]))
    if tagged[0] == "c":
        return all(math.isfinite(float(x)) for x in tagged[1])
    if tagged[0] in ("l", "t", "S", "F", "it"):
        return all(_finite(x) for x in tagged[1])
    if tagged[0] == "d":
        return all(_finite(k) and _finite(v) for k, v in tagged[1])
    return True


def usable(reference: Sequence, indices: Sequence[int], own: Sequence[int], need: int) -> list[int]:
    """The first ``need`` of the candidate probe ``indices`` whose reference answer (``(kind, tagged)``) is a finite
    value of a kind the reference also gives on the task's ``own`` input indices."""
    kinds = {reference[i][1][0] for i in own if reference[i][0] == "value" and reference[i][1]}
    out = []
    for i in indices:
        kind, tagged = reference[i]
        if kind == "value" and tagged and (not kinds or tagged[0] in kinds) and _finite(tagged):
            out.append(i)
        if len(out) >= need:
            break
    return out


def same_value(got, expected) -> bool:
    """Whether ``got`` equals ``expected`` as the tests compare: ``==``, floats within ``FLOAT_TOLERANCE``."""
    if isinstance(expected, float) and isinstance(got, int | float) and not isinstance(got, bool):
        return math.isclose(got, expected, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE)
    if isinstance(expected, list | tuple) and type(got) is type(expected):
        return len(got) == len(expected) and all(same_value(a, b) for a, b in zip(got, expected, strict=True))
    if isinstance(expected, dict) and isinstance(got, dict):
        return got.keys() == expected.keys() and all(same_value(got[k], expected[k]) for k in expected)
    try:
        return bool(got == expected)
    except Exception:  # noqa: BLE001
        return False


def answered_alike(got: Sequence, expected: Sequence) -> bool:
    """Whether a candidate's answer ``(kind, tagged)`` is the reference's value (decoded by the runner's codec)."""
    if got[0] != "value" or expected[0] != "value":
        return False
    try:
        return same_value(codec.decode(got[1]), codec.decode(expected[1]))
    except (codec.BadValue, RecursionError, TypeError, ValueError):
        return False
