"""The two agent roles a domain may take on, each a mixin only the domains that play it implement.

``SolvedByAgents``: an agent solver trial starts from ``agent_context`` (a ``ToolEnv`` workspace) and is judged by
``agent_grade`` from what the episode left; the defaults ask for the solver prompt's answer in a file.
``WritesInEpisodes``: the generator is an agent, and its task is what the episode left (``episode_completion``),
parsed and checked like a completion (``propel.rollouts.scorer.GeneratorScorer``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from propel.records import Context, Prompt, Task
from propel.sandbox.sandbox import Sandbox


class SolvedByAgents:
    """Mixin for a ``Domain`` whose tasks an agent solver can attempt (``propel.rollouts.AgentSolver``)."""

    agent_answer_file: str = "answer.txt"
    """The workspace file an agent solver writes its final answer into (the default ``agent_context``)."""

    def agent_context(self, task: Task, task_id: str) -> Context:
        """The start of an agent solver trial on a valid task, in ``propel.envs.ToolEnv``'s task format: a chat
        prompt, starting ``files``, the files to ``collect`` when the episode ends (and a ``verify`` command where the
        workspace can check itself). The default asks for the solver prompt's answer in ``agent_answer_file``."""
        prompt = self.solver_prompt(task)
        messages = [dict(m) for m in prompt.messages] if prompt.messages else [{"role": "user", "content": prompt.text}]
        messages[-1]["content"] += (
            f"\n\nYou work in a shell workspace. Write your final answer into {self.agent_answer_file} "
            "(in the format asked above), then submit."
        )
        data = {"files": {}, "collect": [self.agent_answer_file]}
        return Context(id=task_id, prompt=Prompt(messages=messages), data=data)

    def agent_grade(self, task: Task, artifacts: Sequence[dict[str, Any]], sandbox: Sandbox | None) -> list[bool]:
        """Pass/fail of agent solver trials from what each episode left: ``artifacts["files"]`` (the collected
        files) and ``artifacts["verifier"]`` (the in-workspace verifier's result). The default grades the answer file
        as a solver completion; a domain whose ``agent_context`` sets ``verify`` returns the verifier's ``passed``."""
        answers = [(a.get("files") or {}).get(self.agent_answer_file) or "" for a in artifacts]
        return self.grade(task, answers, sandbox)


class WritesInEpisodes(ABC):
    """Mixin for a ``Domain`` whose generator can be an agent (SWE: the bug is the diff an episode leaves)."""

    @abstractmethod
    def episode_completion(self, context: Context, artifacts: dict[str, Any], turns: Sequence[str] = ()) -> str:
        """The task a generator *episode* produced, as the completion ``parse`` reads (from what the episode left,
        ``artifacts["files"]``, and its assistant ``turns``)."""


def writes_in_episodes(domain: object) -> bool:
    """Whether a generator agent can write this domain's tasks."""
    return isinstance(domain, WritesInEpisodes)
