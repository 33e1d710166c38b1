"""Final-answer extraction from free text (``\\boxed{}``, ``Answer:``) and numeric parsing of answers."""

from __future__ import annotations

import re
from fractions import Fraction

_ANSWER = re.compile(r"(?i)\banswer\s*(?:is\s*[:=]?|[:=])\s*(.+)")
_NUMBER = re.compile(r"[-+]?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?")


def last_boxed(text: str) -> str | None:
    """Content of the last ``\\boxed{...}`` (or ``\\fbox{...}``), with nested braces balanced."""
    start = max(text.rfind("\\boxed{"), text.rfind("\\fbox{"))
    if start < 0:
        return None
    i = text.index("{", start) + 1
    depth = 1
    for j in range(i, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return text[i:j].strip()
    return None


def extract_answer(text: str) -> str | None:
    """The final answer written in ``text``: the last ``\\boxed{}``, else the last ``Answer: ...`` line, else None."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    matches = [m.group(1).strip() for line in text.splitlines() if (m := _ANSWER.search(line))]
    matches = [m for m in matches if m]
    return matches[-1] if matches else None


def parse_number(text: str | None) -> Fraction | None:
    """The first number in an answer string (``1,234``, ``-3.5``, ``7/2``, ``$12``), as an exact Fraction."""
    if not text:
        return None
    cleaned = text.replace("$", "").replace("\\!", "").replace("{,}", ",")
    frac = re.search(r"\\d?frac\{([-+]?\d+)\}\{(\d+)\}", cleaned)
    if frac and int(frac.group(2)) != 0:
        return Fraction(int(frac.group(1)), int(frac.group(2)))
    match = _NUMBER.search(cleaned)
    if not match:
        return None
    token = match.group(0).replace(",", "").replace(" ", "")
    try:
        return Fraction(token)
    except (ValueError, ZeroDivisionError):
        return None
