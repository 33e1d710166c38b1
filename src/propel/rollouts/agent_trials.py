"""Agent solver trials: each valid task tried ``n_trials`` times by a multi-turn agent episode, graded by its domain.

The multi-turn counterpart of ``propel.domains.trials.solver_trials``, with the same ``Trials`` out, so pools, utility
labels and evaluation summaries read the same whichever solver ran: the domain turns a task into an agent task
(``SolvedByAgents.agent_context``), an ``EpisodeRunner`` runs the episodes (batched generation, tool calls in parallel
in the sandbox) and ``SolvedByAgents.agent_grade`` judges what each episode left behind (its collected files, its
verifier). An
episode that failed for infrastructure reasons says nothing about the task: it is run again, and one that keeps
failing stops the job with the error instead of entering the pool as an unsolved trial.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from propel.domains.agents import SolvedByAgents
from propel.domains.interface import Domain
from propel.domains.trials import SolverSpec, Trials
from propel.engines.engine import Engine, SamplingSpec
from propel.envs.agent_env import AgentEnv
from propel.errors import ConfigError
from propel.records import Context, Prompt, Sample, Task
from propel.rollouts.episode_runner import SCHEDULES, EpisodeRunner
from propel.sandbox.sandbox import Sandbox
from propel.tasks.shell import DEMONSTRATION


class AgentEpisodes:
    """How a job that does not train runs agent episodes: the environment, concurrency, schedule and retries.

    ``LabelingModule(generator_agent=...)`` takes it for generator episodes (a task written in a workspace: SWE's
    bugs); ``AgentSolver`` adds solver trials on top.

    Args:
        env: builds one ``AgentEnv`` per episode (a ``class_path`` in YAML), e.g. ``propel.envs.ToolEnv``.
        concurrency: episodes alive at once.
        schedule: ``rounds`` (reproducible) or ``async`` (generation overlaps tool calls).
        max_context_tokens: cap on an episode's tokens; the engine's context length applies too.
        retries: reruns of episodes that failed outside the policy (sandbox or engine) before the job stops.
        demonstration: open each conversation with one solved example episode (``propel.tasks.shell.DEMONSTRATION``:
            write a file, submit); small models copy a shown call far more often than they follow a described one.
        execute_cut_turns: hand a turn cut by the token budget or the context limit to the environment; False ends
            the episode as ``length`` instead (``EpisodeRunner``).
    """

    def __init__(
        self,
        env: Callable[[], AgentEnv],
        concurrency: int = 8,
        schedule: str = "rounds",
        max_context_tokens: int | None = 2048,
        retries: int = 2,
        demonstration: bool = False,
        execute_cut_turns: bool = False,
    ) -> None:
        if not callable(env):
            raise TypeError(f"agent env must build an AgentEnv (a class_path in YAML), got {type(env).__name__}")
        if concurrency < 1:
            raise ConfigError(f"agent concurrency must be >= 1, got {concurrency}")
        if schedule not in SCHEDULES:
            raise ConfigError(f"agent schedule must be one of {SCHEDULES}, got {schedule!r}")
        if retries < 0:
            raise ConfigError(f"agent retries must be >= 0, got {retries}")
        self.make_env, self.concurrency, self.schedule = env, concurrency, schedule
        self.max_context_tokens, self.retries, self.demonstration = max_context_tokens, retries, demonstration
        self.execute_cut_turns = execute_cut_turns

    def run(
        self, engine: Engine, contexts: Sequence[Context], sampling: SamplingSpec, sandbox: Sandbox | None
    ) -> list[list[Sample]]:
        """``sampling.n`` episodes per context (a group each, in order); an episode that failed outside the policy
        is rerun up to ``retries`` times, and one that keeps failing stops the job with its error."""
        if self.demonstration:
            contexts = [replace(c, prompt=Prompt(messages=[*DEMONSTRATION, *c.prompt.messages])) for c in contexts]
        runner = EpisodeRunner(
            engine,
            self.make_env,
            sandbox,
            self.concurrency,
            self.schedule,
            self.max_context_tokens,
            execute_cut_turns=self.execute_cut_turns,
        )
        groups, _ = runner.run(contexts, sampling)
        for _ in range(self.retries):
            failed = _failed(groups)
            if not failed:
                break
            redo, _ = runner.run([contexts[g] for g, _ in failed], replace(sampling, n=1))
            for (g, k), (sample,) in zip(failed, redo, strict=True):
                groups[g][k] = sample
        if failed := _failed(groups):
            g, k = failed[0]
            raise RuntimeError(
                f"{len(failed)} agent episodes failed outside the policy after {self.retries} retries (first: "
                f"{contexts[g].id!r}: {groups[g][k].infra_error}); fix the sandbox or engine and rerun (rows written "
                "so far are kept)"
            )
        return groups


class AgentSolver(AgentEpisodes):
    """Solver trials as agent episodes (``LabelingModule(solver_agent=...)``; evaluation inherits it); arguments as
    ``AgentEpisodes``."""

    def trials(
        self,
        domain: Domain,
        engine: Engine,
        tasks: Sequence[Task],
        spec: SolverSpec,
        sandbox: Sandbox | None,
        ids: Sequence[str],
    ) -> tuple[list[Trials], list[list[Sample]]]:
        """``spec.n_trials`` episodes per task (ids name the episodes), graded; also returns the episodes."""
        if not isinstance(domain, SolvedByAgents):
            raise ConfigError(f"{type(domain).__name__} cannot be solved by agents (it does not take SolvedByAgents)")
        if not tasks:
            return [], []
        contexts = [domain.agent_context(task, task_id) for task, task_id in zip(tasks, ids, strict=True)]
        groups = self.run(engine, contexts, spec.sampling(), sandbox)  # stop strings: the environment's
        trials = [
            Trials(
                [bool(x) for x in domain.agent_grade(task, [s.artifacts for s in group], sandbox)],
                sum(s.assistant_length for s in group),
            )
            for task, group in zip(tasks, groups, strict=True)
        ]
        return trials, groups


def _failed(groups: list[list[Sample]]) -> list[tuple[int, int]]:
    return [(g, k) for g, group in enumerate(groups) for k, s in enumerate(group) if s.infra_error]
