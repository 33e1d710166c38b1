"""Cheap numbers about a word problem with an expression: the features a rival ranks tasks by without any model.

An activation probe earns its place only by ranking tasks better than these do (``propel.probes.rivals``): the
answer's size alone predicted the 135M solver's band better than the probe on the committed math rows.
"""

from __future__ import annotations

import math
from fractions import Fraction

from propel.domains.math.degeneracy import stated_numbers
from propel.domains.math.expression import ExpressionError, operations, quantities

FEATURES = (
    "log_abs_answer",
    "answer_digits",
    "operations",
    "quantities",
    "log_max_quantity",
    "stated_numbers",
    "problem_words",
    "has_division",
    "has_multiplication",
    "has_subtraction",
)


def expression_features(problem: str, expression: str, answer: int | Fraction) -> dict[str, float]:
    """``FEATURES`` of one valid task (always the same keys, in that order)."""
    try:
        written, ops = quantities(expression), operations(expression)
    except ExpressionError:
        written, ops = [], 0
    answer = abs(Fraction(answer))
    return {
        "log_abs_answer": math.log1p(float(answer)),
        "answer_digits": float(len(str(int(answer)))),
        "operations": float(ops),
        "quantities": float(len(written)),
        "log_max_quantity": math.log1p(float(max((abs(q) for q in written), default=0))),
        "stated_numbers": float(len(stated_numbers(problem, words=True))),
        "problem_words": float(len(problem.split())),
        "has_division": float("/" in expression or "÷" in expression),
        "has_multiplication": float("*" in expression or "×" in expression),
        "has_subtraction": float("-" in expression.strip().lstrip("-")),
    }
