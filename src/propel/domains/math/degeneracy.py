"""When a word problem with an executable expression needs no arithmetic: the math expression domain's strict rule.

A generated task "There are 10 dolphins. How many dolphins are there? => 10" parses and evaluates, and a 135M
solver answers it, so a reward that pays for solvable-but-not-trivial tasks pays for it too. The rule asks whether
solving the task needs the work the domain is about, arithmetic on the problem's quantities. Each reason below
names one way it does not:

- ``answer_stated``: the answer (or its magnitude) is a number the problem already states, in digits or words;
- ``no_operation``: the expression is a bare number (a sign is not an operation);
- ``ungrounded_number``: a quantity of the expression is not in the problem (nor a unit conversion the problem's
  own units imply, such as 60 for hours and minutes): the expression answers some other question;
- ``inert_quantity``: a quantity whose value does not matter (changing every copy of it leaves the answer as it
  was: ``x - x + y``, ``y * 0 * x``): the operation on it is no work;
- ``solved_example``: the problem is one of the solved examples in the solver's own prompt, whose answer it shows.

Honest tasks can trip ``answer_stated`` by coincidence ("8 slices, 3 friends eat 2 each" -> 2); the rule counts
them degenerate anyway: the solver can answer them by copying a number, which is what the reward must not pay for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fractions import Fraction

from propel.domains.math.expression import ExpressionError, evaluate_replacing, operations, quantities

REASONS = ("answer_stated", "no_operation", "ungrounded_number", "inert_quantity", "solved_example")
"""The reasons, in the order they are checked (a task counts under the first it meets)."""

_UNITS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
]
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
_WORDS: dict[str, int] = {w: i for i, w in enumerate(_UNITS)}
_WORDS.update({w: 10 * (i + 2) for i, w in enumerate(_TENS)})
_WORDS.update(dozen=12, dozens=12, hundred=100, thousand=1000)
_MULTIPLIERS: dict[str, tuple[Fraction, ...]] = {
    "half": (Fraction(2), Fraction(1, 2)), "halves": (Fraction(2), Fraction(1, 2)), "twice": (Fraction(2),),
    "double": (Fraction(2),), "doubles": (Fraction(2),), "pair": (Fraction(2),), "pairs": (Fraction(2),),
    "triple": (Fraction(3),), "thrice": (Fraction(3),), "third": (Fraction(3), Fraction(1, 3)),
    "thirds": (Fraction(3), Fraction(1, 3)), "quarter": (Fraction(4), Fraction(1, 4)),
    "quarters": (Fraction(4), Fraction(1, 4)),
}  # fmt: skip
"""Words that imply a factor an expression may use ("half of them" -> ``/ 2`` or ``* 0.5``) without stating a
count: they ground an expression's quantity, but an answer of 2 is not "stated" by the word "half"."""
_CONVERSIONS = (
    (("hour", "minute"), 60),
    (("minute", "second"), 60),
    (("day", "hour"), 24),
    (("week", "day"), 7),
    (("year", "month"), 12),
    (("year", "week"), 52),
    (("year", "day"), 365),
    (("dollar", "cent"), 100),
    (("meter", "centimeter"), 100),
    (("kilometer", "meter"), 1000),
    (("kilogram", "gram"), 1000),
    (("liter", "milliliter"), 1000),
    (("foot", "inch"), 12),
    (("feet", "inch"), 12),
)
"""Unit pairs whose conversion factor a problem implies when it names both units (``percent``/``%`` implies 100)."""


def stated_numbers(text: str, words: bool = False) -> set[Fraction]:
    """The numbers written in ``text`` (``1,200``, ``3.5``; with ``words``, also cardinal number words: "five",
    "twenty-five", "a dozen")."""
    found = {Fraction(m.replace(",", "")) for m in re.findall(r"\d+(?:,\d{3})*(?:\.\d+)?", text)}
    if words:
        tokens = re.findall(r"[a-z]+(?:-[a-z]+)?", text.lower())
        for token in tokens:
            parts = token.split("-")
            if all(p in _WORDS for p in parts):
                found.add(Fraction(sum(_WORDS[p] for p in parts)))
                found.update(Fraction(_WORDS[p]) for p in parts)
    return found


def implied_numbers(text: str) -> set[Fraction]:
    """Factors the problem implies without stating them as counts: multiplier words ("half", "twice", "a third") and
    the conversion factors of its own units (both units named; ``percent`` or ``%`` implies 100)."""
    lower = text.lower()
    found = {Fraction(100)} if ("percent" in lower or "%" in lower) else set()
    for word in re.findall(r"[a-z]+", lower):
        found.update(_MULTIPLIERS.get(word, ()))
    for units, factor in _CONVERSIONS:
        if all(re.search(rf"\b{u}", lower) for u in units):
            found.add(Fraction(factor))
    return found


def normalized_problem(text: str) -> str:
    """A problem's text for copy checks: lower case, words and numbers only, single spaces."""
    return " ".join(re.findall(r"[a-z]+|\d+(?:\.\d+)?", text.lower()))


def degenerate_reasons(
    problem: str, expression: str, answer: Fraction | int, solved_problems: Iterable[str] = ()
) -> list[str]:
    """Every reason (``REASONS``) that applies to a task whose expression evaluated to ``answer``, in check order
    (empty: the task needs arithmetic on its own quantities). ``solved_problems``: the problems whose answers the
    solver's prompt shows."""
    answer = Fraction(answer)
    stated = stated_numbers(problem, words=True)
    try:
        written, ops = quantities(expression), operations(expression)
    except ExpressionError:
        return []  # not this rule's business: validity refuses an expression that does not evaluate
    out = []
    if abs(answer) in stated:
        out.append("answer_stated")
    if ops == 0:
        out.append("no_operation")
    missing = set(written) - stated
    if missing and not missing <= implied_numbers(problem):
        out.append("ungrounded_number")
    if ops and any(_inert(expression, q, answer) for q in set(written)):
        out.append("inert_quantity")
    if normalized_problem(problem) in {normalized_problem(p) for p in solved_problems}:
        out.append("solved_example")
    return out


def _inert(expression: str, quantity: Fraction, answer: Fraction) -> bool:
    """Whether changing every copy of ``quantity`` (to two other values) leaves the answer unchanged."""
    for new in (quantity + 1, 2 * quantity + 3):
        try:
            if evaluate_replacing(expression, quantity, new) != answer:
                return False
        except ExpressionError:
            return False  # a change that breaks the expression (a division by zero) shows the quantity matters
    return True
