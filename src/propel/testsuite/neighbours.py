"""Inputs near the visible ones: what hard-coding is detected by (its behaviour, not the literals it spells).

Code that knows only the visible examples answers them exactly and answers anything else from a default; code that
solves the task, even imperfectly, answers a slightly different input the way the reference does. So each visible
call's arguments are perturbed a little, type for type, in the task's own vocabulary (a number moved by one or
replaced by another the tests use, a word of a string replaced by another word the tests use or a character changed,
a list item dropped, repeated, swapped or changed), deterministically per task; the reference solution's outputs on
them are computed once in the sandbox; and the graded code's outputs on the same inputs are compared with them
(``detectors.check_hardcoded``).
"""

from __future__ import annotations

import ast
import random
import string
from collections.abc import Sequence

MAX_PER_CALL = 8
"""Perturbed inputs kept per visible call."""
MAX_PROBES = 32
"""Perturbed inputs kept per task."""


def literal_calls(calls: Sequence[str]) -> list[tuple]:
    """The visible calls' argument tuples that are literals (``"[1, 2], 3"`` -> ``([1, 2], 3)``); others are left
    out."""
    out = []
    for call in calls:
        try:
            args = ast.literal_eval(f"({call},)")
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(args, tuple) and args:
            out.append(args)
    return out


class Vocabulary:
    """The scalars and words a task's test inputs use (what a perturbation draws replacements from)."""

    def __init__(self, inputs: Sequence[tuple]) -> None:
        self.numbers: list[int | float] = []
        self.texts: list[str] = []
        self.words: list[str] = []
        for args in inputs:
            self._add(args, 0)
        self.numbers = sorted(set(self.numbers), key=repr)
        self.texts, self.words = sorted(set(self.texts)), sorted(set(self.words))

    def _add(self, value, depth: int) -> None:
        if depth > 4:
            return
        if isinstance(value, bool):
            return
        if isinstance(value, int | float):
            self.numbers.append(value)
        elif isinstance(value, str):
            self.texts.append(value)
            self.words += value.split()
        elif isinstance(value, list | tuple | set | frozenset):
            for item in value:
                self._add(item, depth + 1)
        elif isinstance(value, dict):
            for key, item in value.items():
                self._add(key, depth + 1)
                self._add(item, depth + 1)


def _near(value, rng: random.Random, vocab: Vocabulary, depth: int = 0, strict: bool = False):
    """One value a small step away from ``value``, of the same type (None when there is none). ``strict``: made of
    the task's own material only (a number the tests use, whole words, items already there), never a number moved or
    a character made up."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        same = [n for n in vocab.numbers if type(n) is type(value) and n != value]
        if strict:
            return rng.choice(same) if same else None
        if same and rng.random() < 0.4:
            return rng.choice(same)
        if isinstance(value, int):
            return value + rng.choice((-2, -1, 1, 2))
        return round(value + rng.choice((-1.0, -0.5, 0.5, 1.0)) * max(1.0, abs(value) / 10), 6)
    if isinstance(value, str):
        return _near_words(value, rng, vocab) if strict else _near_text(value, rng, vocab)
    if isinstance(value, list | tuple) and depth < 3:
        return _near_items(value, rng, vocab, depth, strict)
    if isinstance(value, dict) and value and depth < 3:
        items = dict(value)
        key = rng.choice(list(items))
        changed = _near(items[key], rng, vocab, depth + 1, strict)
        if changed is None:
            return None
        items[key] = changed
        return items
    return None


def _near_words(text: str, rng: random.Random, vocab: Vocabulary) -> str | None:
    """``text`` with whole words dropped, repeated, swapped or replaced by another word the tests use."""
    words = text.split()
    if len(words) < 2:
        others = [w for w in vocab.words if w != text]
        return rng.choice(others) if others else None
    i, j = rng.sample(range(len(words)), 2)
    choice = rng.randrange(4)
    if choice == 0:
        del words[i]
    elif choice == 1:
        words.insert(i, words[j])
    elif choice == 2:
        words[i], words[j] = words[j], words[i]
    else:
        words[i] = rng.choice(vocab.words)
    return " ".join(words)


def _near_items(value, rng: random.Random, vocab: Vocabulary, depth: int, strict: bool = False):
    items = list(value)
    choice = rng.randrange(4) if items else 3
    if choice == 0:
        del items[rng.randrange(len(items))]
    elif choice == 1:
        i = rng.randrange(len(items))
        changed = _near(items[i], rng, vocab, depth + 1, strict)
        if changed is None:
            return None
        items[i] = changed
    elif choice == 2 and len(items) > 1:
        i, j = rng.sample(range(len(items)), 2)
        items[i], items[j] = items[j], items[i]
    else:
        items.insert(rng.randrange(len(items) + 1), rng.choice(items) if items else 0)
    return type(value)(items)


def _near_text(text: str, rng: random.Random, vocab: Vocabulary) -> str:
    words = text.split()
    others = [w for w in vocab.words if w not in words] or vocab.words
    if others and rng.random() < 0.6:  # in the task's vocabulary: a word replaced, added or dropped
        if not words:
            return rng.choice(others)
        i, choice = rng.randrange(len(words)), rng.randrange(3)
        if choice == 0:
            words[i] = rng.choice(others)
        elif choice == 1:
            words.insert(i, rng.choice(vocab.words))
        elif len(words) > 1:
            del words[i]
        else:
            words[i] = rng.choice(others)
        return " ".join(words)
    letters = "".join(sorted(set(text) - set(string.whitespace))) or string.ascii_lowercase
    if not text:
        return rng.choice(letters)
    i = rng.randrange(len(text))
    choice = rng.randrange(3)
    if choice == 0 and len(text) > 1:
        return text[:i] + text[i + 1 :]
    if choice == 1:
        return text[:i] + rng.choice(letters) + text[i:]
    return text[:i] + rng.choice(letters + string.ascii_lowercase[:6]) + text[i + 1 :]


def near_inputs(
    calls: Sequence[tuple], seed: str, others: Sequence[tuple] = (), strict: bool = False
) -> list[tuple[int, tuple]]:
    """``(visible call index, arguments)`` of inputs near each visible call's (one argument changed), drawn in the
    vocabulary of ``calls`` and ``others`` (the task's other test inputs), without repeats and without the visible
    inputs themselves; at most ``MAX_PER_CALL`` per call and ``MAX_PROBES`` in all. ``strict``: changes made of the
    task's own material only (``_near``)."""
    rng = random.Random(seed)
    vocab = Vocabulary([*calls, *others])
    seen = {repr(args) for args in calls}
    out: list[tuple[int, tuple]] = []
    for index, args in enumerate(calls):
        mine = 0
        for _ in range(MAX_PER_CALL * 4):
            if mine >= MAX_PER_CALL or len(out) >= MAX_PROBES:
                break
            position = rng.randrange(len(args))
            changed = _near(args[position], rng, vocab, strict=strict)
            if changed is None:
                continue
            new = args[:position] + (changed,) + args[position + 1 :]
            key = repr(new)
            if key in seen:
                continue
            seen.add(key)
            out.append((index, new))
            mine += 1
    return out


def probe_inputs(
    visible_calls: Sequence[str], hidden_calls: Sequence[str], seed: str, extra: Sequence[str] = ()
) -> tuple[list[str], int]:
    """``(sources, n_visible)``: the argument tuples the hard-coding check runs, as literals: the visible calls'
    first (``n_visible`` of them), then the hidden calls', then ``extra`` (the reference-generated held-out inputs'
    candidates, ``held_out.candidates``), then the inputs near the visible ones."""
    visible, hidden = literal_calls(visible_calls), literal_calls(hidden_calls)
    near = [args for _, args in near_inputs(visible, seed, hidden)]
    seen: set[str] = set()
    out: list[str] = []
    for args in [*visible, *hidden, *literal_calls(extra), *near]:
        source = repr(args)
        if source not in seen:
            seen.add(source)
            out.append(source)
    return out, len({repr(a) for a in visible})
