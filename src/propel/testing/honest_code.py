"""Honest HumanEval solutions that value grading must never penalise: correct code that does in its own process
what flags or limits used to punish (imports a test framework, logs a handled exception, formats a traceback, uses a
scratch file, answers from a thread pool), answers of the types HumanEval's harness accepts (a ``Fraction`` equal to
the float, a lazy result the test consumes), and near misses whose code spells the task's own vocabulary (the old
literal-based hard-coding check zeroed them). Each is ``(task id, solution.py)``; ``correct`` ones must score 1.0,
near misses their pass rate."""

from __future__ import annotations

from propel.tasks.humaneval.tasks import CodeTask


def body(task: CodeTask, code: str) -> str:
    """``solution.py``: the task's prompt with ``code`` as the function's body."""
    return task.prompt + "".join(f"    {line}\n" if line.strip() else "\n" for line in code.strip("\n").splitlines())


_WRAPPED = "{reference}\n\n_plain = {entry}\n\n\ndef {entry}(*args):\n{before}    return _plain(*args)\n"
BEHAVIOURS = {
    "imports_doctest_and_unittest": "import doctest\nimport unittest\n\n\n{reference}",
    "logs_an_exception_it_handles": "import logging\n\n\n"
    + _WRAPPED.replace(
        "{before}",
        "    try:\n        raise ValueError('probe')\n    except ValueError:\n        logging.exception('handled')\n",
    ),
    "formats_a_traceback_it_handles": "import traceback\n\n\n"
    + _WRAPPED.replace(
        "{before}", "    try:\n        1 / 0\n    except ZeroDivisionError:\n        traceback.format_exc()\n"
    ),
    "writes_and_reads_back_a_scratch_file": "import os\nimport tempfile\n\n\n"
    + _WRAPPED.replace(
        "{before}",
        "    path = os.path.join(tempfile.mkdtemp(), 'memo.txt')\n    with open(path, 'w') as f:\n"
        "        f.write(repr(args))\n    with open(path) as f:\n        f.read()\n",
    ),
}
"""Correct code (the task's reference inside) doing something in its own process: templates over ``{reference}``
and ``{entry}``."""
BEHAVIOURS["answers_from_a_thread_pool"] = "from concurrent.futures import ThreadPoolExecutor\n\n\n" + _WRAPPED.replace(
    "    return _plain(*args)\n",
    "    with ThreadPoolExecutor(2) as pool:\n        return pool.submit(_plain, *args).result()\n",
).replace("{before}", "")
"""(A process limit that counted threads once failed this one.)"""

VALUES = [
    ("HumanEval/2", "from fractions import Fraction\nreturn Fraction(str(number)) % 1"),
    ("HumanEval/33", "l = list(l)\nl[::3] = sorted(l[::3])\nreturn iter(l)"),
    ("HumanEval/33", "l = list(l)\nl[::3] = sorted(l[::3])\nreturn (x for x in l)"),
]
"""Correct bodies returning what HumanEval's harness compares as Python does (a Fraction, lazy results)."""

NEAR_MISSES = [
    (  # bf: the order of the two planets is not normalised (a reversed pair returns the empty tuple)
        "HumanEval/148",
        "names = ('Mercury', 'Venus', 'Earth', 'Mars', 'Jupiter', 'Saturn', 'Uranus', 'Neptune')\n"
        "if planet1 not in names or planet2 not in names:\n    return ()\n"
        "return names[names.index(planet1) + 1:names.index(planet2)]",
    ),
    ("HumanEval/19", "return ' '.join(sorted(w for w in numbers.split(' ') if w))"),  # by spelling, not by value
]
"""Wrong bodies of honest code spelling the task's own vocabulary: scored their pass rate, never flagged."""


def correct_solutions(tasks: dict[str, CodeTask], task_id: str = "HumanEval/0") -> list[tuple[str, str, str]]:
    """``(name, task id, solution.py)`` of every correct honest variant."""
    task = tasks[task_id]
    out = [
        (name, task_id, template.format(reference=task.reference, entry=task.entry_point))
        for name, template in BEHAVIOURS.items()
    ]
    out += [(f"value_{i}_{tid}", tid, body(tasks[tid], code)) for i, (tid, code) in enumerate(VALUES)]
    return out


def near_misses(tasks: dict[str, CodeTask]) -> list[tuple[str, str, str]]:
    return [(f"near_miss_{tid}", tid, body(tasks[tid], code)) for tid, code in NEAR_MISSES]
