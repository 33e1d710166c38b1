"""Signs that a task generator is drifting into tasks that need no work: templates, copies, answer sizes.

A generator trained against any task reward can find a cheap corner of it: one template with the numbers changed,
the in-context examples copied back, answers that shrink toward what a weak solver guesses. These functions measure
each on one batch of generations; ``propel.callbacks.collapse.CollapseDetector`` logs them every check and alarms
when one moves away from where the run started, and adversarial mining sends the flagged tasks to the solver.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


def template(text: str) -> str:
    """A task's template: lower case, every number replaced by ``#``, punctuation dropped, single spaces."""
    return " ".join(re.findall(r"[a-z#]+", _NUMBER.sub("#", text.lower())))


def words(text: str) -> str:
    """Lower-case words and numbers, single spaces (for copy checks)."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def distinct_templates(texts: Sequence[str]) -> float | None:
    """Distinct templates per text (1.0: every task its own template); None below 2 texts."""
    if len(texts) < 2:
        return None
    return len({template(t) for t in texts}) / len(texts)


def top_template_share(texts: Sequence[str]) -> float | None:
    """The share of texts in the most common template; None below 2 texts."""
    if len(texts) < 2:
        return None
    return Counter(template(t) for t in texts).most_common(1)[0][1] / len(texts)


def copies_context(task_text: str, prompt: str, min_words: int = 5) -> bool:
    """Whether a task repeats its own prompt's in-context material: a line of the task of at least ``min_words``
    words appears word for word (numbers included) in the prompt."""
    haystack = words(prompt)
    for line in task_text.splitlines():
        line = words(line.split(":", 1)[1] if ":" in line[:20] else line)  # "Problem: ..." -> its content
        if len(line.split()) >= min_words and line in haystack:
            return True
    return False


def answer_magnitudes(answers: Sequence) -> list[float]:
    """``log10(1 + |answer|)`` of each numeric answer (others skipped): the answer-size distribution."""
    out = []
    for a in answers:
        if isinstance(a, bool) or not isinstance(a, int | float):
            continue
        if math.isfinite(a):
            out.append(math.log10(1.0 + abs(a)))
    return out


def quantile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile by linear interpolation (None when empty)."""
    if not values:
        return None
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    low, high = math.floor(pos), math.ceil(pos)
    return xs[low] + (xs[high] - xs[low]) * (pos - low)
