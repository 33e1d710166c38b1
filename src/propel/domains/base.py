"""The domain interface: what a task domain owns, from generator prompts to grading.

A domain turns generator completions into tasks, checks them cheaply (sandboxed), writes the solver prompt and grades
solver completions. Everything that runs model-written code goes through a ``propel.sandbox.base.Sandbox``.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

from propel.engines.base import Engine, Prompt
from propel.sandbox.base import Sandbox


@dataclass
class Context:
    """One generator input: a stable id (resume key), the prompt, a group (for grouped splits) and gold data."""

    id: str
    prompt: Prompt
    group: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    """Gold data a reward or grader may read (a reference answer, a ticket's gold articles); empty for generators."""

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass
class Task:
    """A parsed task: domain name, JSON-serialisable fields, and ground truth filled in by ``validity``."""

    domain: str
    data: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Task:
        return cls(**json.loads(text))


class ParseFailure(NamedTuple):
    """Why a completion is not a task (a short, stable reason string, e.g. ``"no_code_block"``)."""

    reason: str


class Verdict(NamedTuple):
    """Validity of one task: ``ok`` and a short reason (``"ok"`` when valid)."""

    ok: bool
    reason: str


class Domain(ABC):
    """A task domain. Subclasses define ``name`` and the six methods below."""

    name: str = "domain"
    needs_sandbox: bool = True
    """False for domains that never run model-written code (no sandbox is started for them)."""
    solver_stop: tuple[str, ...] = ()
    """Stop strings for solver sampling."""
    generator_stop: tuple[str, ...] = ()
    """Stop strings for generator sampling (e.g. a blank line for raw few-shot prompts)."""
    needs_oracle: bool = False
    """True for domains whose reference answers come from an oracle model (given with ``set_oracle``)."""

    @abstractmethod
    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        """``n`` generator contexts, deterministic in ``seed``; ids are unique and stable across calls."""

    @abstractmethod
    def parse(self, completion: str) -> Task | ParseFailure:
        """Structured task from a generator completion, or why it is malformed."""

    @abstractmethod
    def validity(self, tasks: Sequence[Task], sandbox: Sandbox) -> list[Verdict]:
        """Cheap checks (sandboxed where code runs); valid tasks get their ground truth written into ``task.data``."""

    @abstractmethod
    def solver_prompt(self, task: Task) -> Prompt:
        """The prompt the solver sees for a valid task."""

    @abstractmethod
    def grade(self, task: Task, completions: Sequence[str], sandbox: Sandbox) -> list[bool]:
        """Pass/fail for each solver completion of a valid task."""

    @abstractmethod
    def topic(self, task: Task) -> str:
        """A coarse topic label (for top-topic diversity)."""

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

    def set_oracle(self, engine: Engine) -> None:  # noqa: B027 - optional hook
        """Take the engine whose answers become references (domains with ``needs_oracle``); others ignore it."""

    def render(self, task: Task) -> str:
        """Human-readable task text (what diversity metrics read, and probes unless ``probe_input`` says more)."""
        return json.dumps(task.data, sort_keys=True)

    def task_metrics(self, task: Task) -> dict[str, float]:
        """Per-task numbers an evaluation averages over valid tasks, with intervals, and a base-vs-trained comparison
        compares (SWE: diff size, failing tests); none by default."""
        return {}

    def probe_input(self, task: Task) -> str | list[str]:
        """What a probe reads of a task: its rendering, or the turns of the generator episode that wrote it (a
        trajectory: each turn pooled over its tokens, then across turns; ``propel.probes.ActivationExtractor``)."""
        return self.render(task)

    @property
    def writes_tasks_in_episodes(self) -> bool:
        """Whether a generator *agent* can write this domain's tasks (it implements ``episode_completion``)."""
        return type(self).episode_completion is not Domain.episode_completion

    def episode_completion(self, context: Context, artifacts: dict[str, Any], turns: Sequence[str] = ()) -> str | None:
        """The task a generator *episode* produced, as the completion ``parse`` reads (from what the episode left,
        ``artifacts["files"]``, and its assistant ``turns``); None where this domain's generator is single-turn."""
        return None
