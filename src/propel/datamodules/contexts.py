"""Single-turn RL data: generator contexts from a domain, one completion per sample, scored in one batch.

The stream (resumable, seeded per batch) is ``ContextStreamDataModule``'s; ``SingleTurnDataModule`` adds the
single-turn rollout scored by one ``Scorer`` (shared by the generator contexts here, coding tasks and triage
tickets), and ``ContextDataModule`` the ``GeneratorScorer`` over a domain.
"""

from __future__ import annotations

from propel.datamodules.stream import ContextStreamDataModule
from propel.domains.interface import Domain
from propel.engines.engine import Engine, SamplingSpec
from propel.records import TaskSource
from propel.rollouts.scorer import GeneratorScorer, Scorer
from propel.rollouts.single_turn import scored_rollout
from propel.rollouts.steps import ContextBatch, Rollout
from propel.sandbox.sandbox import Sandbox


class SingleTurnDataModule(ContextStreamDataModule):
    """A context stream whose rollout is ``sampling.n`` completions per context, scored by one ``Scorer`` in one
    batch; a subclass names the scorer.

    Args:
        tasks: the context source (``contexts(n, seed)``, deterministic in the seed).
        scorer: what scores the completions (its ``stop`` strings end each completion).
        contexts_per_step: contexts per step (each gets ``group_size`` completions).
        seed: stream seed.
    """

    def __init__(self, tasks: TaskSource, scorer: Scorer, contexts_per_step: int = 4, seed: int = 0) -> None:
        super().__init__(tasks, contexts_per_step, seed)
        self._scorer = scorer

    @property
    def scorer(self) -> Scorer:
        return self._scorer

    @property
    def stop(self) -> tuple[str, ...]:
        return tuple(self._scorer.stop)

    def rollout(self, engine: Engine, batch: ContextBatch, sampling: SamplingSpec) -> Rollout:
        """``sampling.n`` completions per context, then the scorer's verdict on all of them in one batch."""
        return scored_rollout(self._scorer, engine, batch.contexts, sampling)


class ContextDataModule(SingleTurnDataModule):
    """Generator contexts for GRPO, one batch per optimizer step, scored by a ``GeneratorScorer`` over the domain.

    A ``propel.rollouts.RolloutSource``. The scorer's sandbox is started when fitting starts and stopped when
    it ends; a domain whose references come from an oracle (``OracleMathDomain(oracle_model=...)``) builds it then,
    and one without an oracle fails then with a one-line error instead of at the first step.

    Args:
        domain: the task domain (``class_path`` in YAML); its ``contexts(n, seed)`` must be deterministic in
            the seed (no global RNG).
        contexts_per_step: contexts per step (each gets ``group_size`` completions).
        seed: stream seed; batch ``i`` uses ``seed * 1_000_003 + i``.
        sandbox: verifier sandbox for the domain's validity checks; None starts a ``LocalSandbox`` when the domain
            needs one.
    """

    def __init__(
        self, domain: Domain, contexts_per_step: int = 4, seed: int = 0, sandbox: Sandbox | None = None
    ) -> None:
        if not isinstance(domain, Domain):
            raise TypeError(f"data.domain must be a propel.domains.interface.Domain, got {type(domain).__name__}")
        super().__init__(domain, GeneratorScorer(domain, sandbox), contexts_per_step, seed)
        self.domain = domain

    def setup(self, stage: str) -> None:
        if stage == "fit":
            if self.domain.needs_oracle:  # build (or refuse the lack of) the oracle now, not at the first step
                oracle = getattr(self.domain, "oracle_engine", None)
                if oracle is None:
                    raise TypeError(f"domain {self.domain.name!r} needs an oracle but has no oracle_engine() to build")
                oracle()
            self._scorer.open()

    def teardown(self, stage: str) -> None:
        if stage == "fit":
            self._scorer.close()
