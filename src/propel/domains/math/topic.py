"""A coarse topic label for math tasks, from keywords in the problem text (for top-topic diversity)."""

from __future__ import annotations

import re

_KEYWORDS = (
    ("money", r"\$|dollar|cent|price|cost|pay|buy|sell"),
    ("time_rate", r"hour|minute|day|week|speed|per "),
    ("geometry", r"area|perimeter|rectangle|triangle|circle|square|angle"),
    ("number_theory", r"divisor|prime|remainder|multiple|gcd|lcm"),
    ("counting", r"ways|arrange|choose|binom|probability"),
    ("algebra", r"solve|equation|\bx\b|variable"),
)


def math_topic(problem: str) -> str:
    """The first keyword topic (money, time_rate, geometry, number_theory, counting, algebra) matching, else other."""
    lower = problem.lower()
    for topic, pattern in _KEYWORDS:
        if re.search(pattern, lower):
            return topic
    return "other"
