"""Multi-turn RL data: tasks for agent episodes, each step's episodes run by an ``EpisodeRunner`` in a sandbox.

The stream (resumable, seeded per batch) is ``ContextStreamDataModule``'s; this adds the environment factory, the
shared sandbox backend (started when fitting starts, stopped when it ends; Docker: one container per live episode)
and the episode schedule.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from propel.datamodules.stream import ContextStreamDataModule
from propel.domains.agents import writes_in_episodes
from propel.domains.interface import Domain
from propel.engines.engine import Engine, SamplingSpec
from propel.envs.agent_env import AgentEnv
from propel.errors import ConfigError
from propel.records import TaskSource
from propel.rollouts.episode_runner import EpisodeRunner
from propel.rollouts.scorer import GeneratorScorer
from propel.rollouts.steps import ContextBatch, Rollout
from propel.sandbox.sandbox import Sandbox


class EpisodeDataModule(ContextStreamDataModule):
    """Agent episodes for multi-turn GRPO: ``group_size`` episodes per task, scored by their environment's verifier.

    A ``propel.rollouts.RolloutSource``. In YAML, ``env`` is a ``class_path`` (with ``init_args``): every episode
    gets its own instance.

    Args:
        env: builds one ``AgentEnv`` per episode (e.g. ``propel.envs.ToolEnv``).
        tasks: the task source, ``contexts(n, seed)`` (e.g. ``propel.tasks.ShellTasks``).
        contexts_per_step: tasks per step.
        seed: stream seed.
        sandbox: the backend episodes open their sessions in (``propel.sandbox.DockerSandbox`` for a container per
            episode); None starts a ``LocalSandbox`` (bubblewrap).
        concurrency: episodes alive at once (1 runs them one after another).
        schedule: ``rounds`` (reproducible batches) or ``async`` (generation overlaps tool calls).
        max_context_tokens: cap on an episode's tokens; the engine's context length applies too.
        stepwise: a chat template that re-renders history makes an episode step-wise (one training row per segment,
            ``Sample.segments``) instead of raising ``TemplateNotAppendOnly``.
        domain: episodes that *write a task* (PROPEL's multi-turn generator: ``SweDomain`` with
            ``propel.tasks.swe.BugInjectionTasks``): each episode's task (``domain.episode_completion``: SWE's
            diff of the files it left) is parsed and checked for validity in the sandbox, as a single-turn
            generator's completion is, so ``Sample.valid``, ``task``, ``topic`` and ``info["reason"]`` say what the
            episode made (what ``ProbeReward``'s gate reads). None: the environment's verifier alone scores it.
        execute_cut_turns: hand a turn cut by the token budget or the context limit to the environment; False ends
            the episode as ``length`` instead (``EpisodeRunner``).
    """

    def __init__(
        self,
        env: Callable[[], AgentEnv],
        tasks: TaskSource,
        contexts_per_step: int = 2,
        seed: int = 0,
        sandbox: Sandbox | None = None,
        concurrency: int = 8,
        schedule: str = "rounds",
        max_context_tokens: int | None = 2048,
        stepwise: bool = True,
        domain: Domain | None = None,
        execute_cut_turns: bool = False,
    ) -> None:
        super().__init__(tasks, contexts_per_step, seed)
        if domain is not None and not writes_in_episodes(domain):
            name = type(domain).__name__
            raise ConfigError(f"data.domain: {name}'s generator is single-turn (it has no episode_completion)")
        self.domain = domain
        if not callable(env):
            raise TypeError(f"data.env must build an AgentEnv (a class_path in YAML), got {type(env).__name__}")
        probe = env()
        if not isinstance(probe, AgentEnv):
            raise TypeError(f"data.env built a {type(probe).__name__}, not a propel.envs.AgentEnv")
        if concurrency < 1:
            raise ConfigError(f"concurrency must be >= 1, got {concurrency}")
        self.make_env, self._stop = env, tuple(probe.stop)
        self.sandbox, self._owns_sandbox = sandbox, False
        self.concurrency, self.schedule, self.max_context_tokens = concurrency, schedule, max_context_tokens
        self.stepwise, self.execute_cut_turns = stepwise, execute_cut_turns

    @property
    def stop(self) -> tuple[str, ...]:
        return self._stop

    def setup(self, stage: str) -> None:
        if stage == "fit" and self.sandbox is None:
            from propel.sandbox.local import LocalSandbox

            self.sandbox, self._owns_sandbox = LocalSandbox(max_workers=1), True

    def teardown(self, stage: str) -> None:
        if stage == "fit" and self._owns_sandbox and self.sandbox is not None:
            self.sandbox.close()
            self.sandbox, self._owns_sandbox = None, False

    def rollout(self, engine: Engine, batch: ContextBatch, sampling: SamplingSpec) -> Rollout:
        runner = EpisodeRunner(
            engine,
            self.make_env,
            self.sandbox,
            self.concurrency,
            self.schedule,
            self.max_context_tokens,
            self.stepwise,
            self.execute_cut_turns,
        )
        groups, times = runner.run(batch.contexts, sampling)
        if self.domain is not None:
            start = time.perf_counter()
            self._score_tasks([s for group in groups for s in group if s.infra_error is None])
            seconds = time.perf_counter() - start
            times.environment_s, times.wall_s = times.environment_s + seconds, times.wall_s + seconds
        return Rollout(
            groups, {"generation_s": times.generation_s, "environment_s": times.environment_s, "wall_s": times.wall_s}
        )

    def _score_tasks(self, samples: list) -> None:
        """Each episode's task, parsed and checked for validity (batched per repo by the domain)."""
        if not samples:
            return
        GeneratorScorer(self.domain, self.sandbox).score(samples)
