"""Single-turn GRPO on coding tasks: the policy writes a function, ``TestSuiteReward`` grades it.

``CodeSolutionScorer`` turns each completion into the ``solution.py`` it proposes (``sample.artifacts["files"]``) and
notes whether it parses; the test suite itself runs in the reward, in the sandbox, batched over the whole step.
"""

from __future__ import annotations

from collections.abc import Sequence

from propel.datamodules.contexts import SingleTurnDataModule
from propel.python_ast import parse_python
from propel.records import Sample, TaskSource
from propel.rollouts.scorer import Scorer
from propel.tasks.humaneval.solution import solution_source


class CodeSolutionScorer(Scorer):
    """Completion -> ``solution.py`` (kept in ``sample.artifacts["files"]``); ``valid`` when it parses."""

    needs_sandbox = False  # nothing runs here: TestSuiteReward runs the tests

    def score(self, samples: Sequence[Sample]) -> None:
        for s in samples:
            data = s.context.data if s.context is not None else {}
            if "prompt" not in data or "entry_point" not in data:
                raise ValueError("CodeSolutionScorer needs contexts with data['prompt'] and data['entry_point']")
            source = solution_source(data["prompt"], s.completion, data["entry_point"])
            s.artifacts["files"] = {data.get("solution_file", "solution.py"): source}
            s.topic = s.context.group
            try:
                parse_python(source)
                s.valid, s.info["reason"] = True, "ok"
            except (SyntaxError, ValueError) as e:
                s.valid, s.info["reason"] = False, f"syntax error: {e}"


class CodeSolutionDataModule(SingleTurnDataModule):
    """Coding-task contexts for single-turn GRPO (``tasks``: e.g. ``propel.tasks.humaneval.HumanEvalTasks``).

    Args:
        tasks: the task source; ``contexts(n, seed)`` deterministic in the seed, each context's ``data`` holding
            the prompt, entry point and test suite ``TestSuiteReward`` grades with.
        contexts_per_step: tasks per step (each gets ``group_size`` completions).
        seed: stream seed.
    """

    def __init__(self, tasks: TaskSource, contexts_per_step: int = 2, seed: int = 0) -> None:
        super().__init__(tasks, CodeSolutionScorer(), contexts_per_step, seed)
