"""Solver-in-the-loop (SIL): the baseline PROPEL's probe replaces (the PROPEL paper's Table 3).

Instead of predicting usefulness from activations, run the solver on every valid generated task during RL and reward
the realized solve count's band membership (1 in the band, 0 outside, the floor for invalid tasks). It is the exact
signal the probe approximates, at the cost of ``n_trials`` solver attempts per valid task per step; the component
counts them (``reward/<name>/trials`` per step, ``trials_total`` so far) so the two rewards can be compared on cost.

The trials are ``propel.domains.trials.solver_trials``, the same call labeling and evaluation make, so a solve count
means the same in all three; or any injected ``run_trials`` (e.g. ``LabelingModule.run_trials`` for agent solvers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from propel.domains.interface import Domain
from propel.domains.trials import SolverSpec, Trials, solver_trials
from propel.engines.engine import Engine
from propel.records import Sample
from propel.rewards.reward import RewardContext, ValidTaskReward
from propel.rollouts.scorer import GeneratorScorer
from propel.sandbox.sandbox import Sandbox

TrialRunner = Callable[[list[Sample]], list[Trials]]
"""Samples with valid tasks -> their graded solver trials (``LabelingModule.run_trials`` has this shape)."""


class SolverInLoopReward(ValidTaskReward):
    """Reward = 1 if a valid task's realized solve count lies in the solver's band, else 0; invalid -> the floor.

    Args:
        domain: the task domain (grades the solver's answers; the same as the GRPO data module's).
        solver: who solves and how often (``n_trials``, ``band``, sampling): the settings labeling used.
        engine: the solver engine; None builds one at ``setup`` (``engine_kind`` for ``solver.model``, or the policy's
            base model when that is None: a separate frozen copy, never the policy being trained).
        engine_kind: engine kind built when ``engine`` is None (``hf``, ``vllm``, ``vllm_server``).
        engine_kwargs: arguments of that engine.
        sandbox: the grading sandbox; None starts a local one when the domain runs model-written code.
        run_trials: inject the trial runner instead (samples -> ``Trials``); then ``engine`` is not used.
        floor: reward of invalid samples; must be below 0, the worst valid outcome.
        name: component name for logging.
        weight: weight in a ``CombinedReward``.
    """

    def __init__(
        self,
        domain: Domain,
        solver: SolverSpec | None = None,
        engine: Engine | None = None,
        engine_kind: str = "hf",
        engine_kwargs: dict[str, Any] | None = None,
        sandbox: Sandbox | None = None,
        run_trials: TrialRunner | None = None,
        floor: float = -1.0,
        name: str = "sil",
        weight: float = 1.0,
    ) -> None:
        super().__init__(floor, name, weight, zero_means="a valid task out of the band")
        self.domain, self.solver = domain, solver or SolverSpec()
        self.engine, self.engine_kind, self.engine_kwargs = engine, engine_kind, dict(engine_kwargs or {})
        self.run_trials = run_trials
        self._scorer = GeneratorScorer(domain, sandbox)
        self._owns_engine = False
        self.trials_total = 0
        """Solver attempts run so far (all steps)."""
        self.last_stats: dict[str, float] = {}

    def setup(self, context: RewardContext) -> None:
        """Build the solver engine and open the grading sandbox once, before training."""
        self._start(context.model_name)

    def _start(self, model_name: str | None = None) -> None:
        if self.run_trials is not None:
            return
        if self.engine is None:
            from propel.engines.factory import make_engine

            name = self.solver_model(self.solver.model, model_name, "SolverInLoopReward")
            self.engine, self._owns_engine = make_engine(self.engine_kind, name, **self.engine_kwargs), True
        if self.domain.needs_oracle:
            self.domain.set_oracle(self.engine)
        self._scorer.open()
        self.run_trials = self._solver_trials

    def _solver_trials(self, samples: list[Sample]) -> list[Trials]:
        sampling = self.solver.sampling(self.domain.solver_stop)
        return solver_trials(self.domain, self.engine, [s.task for s in samples], sampling, self._scorer.sandbox)

    def close(self) -> None:
        """Stop the sandbox this reward started (an engine it built is closed too)."""
        self._scorer.close()
        if self._owns_engine and self.engine is not None:
            self.engine.close()
            self.engine, self._owns_engine, self.run_trials = None, False, None

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        rewards = torch.full((len(samples),), self._floor, dtype=torch.float32)
        scored = self.graded(samples)
        trials: list[Trials] = []
        if scored:
            if self.run_trials is None:
                self._start()
            trials = self.run_trials([samples[i] for i in scored])
            if len(trials) != len(scored):
                raise ValueError(f"run_trials returned {len(trials)} results for {len(scored)} tasks")
            for i, t in zip(scored, trials, strict=True):
                rewards[i] = float(t.in_band(self.solver.band))
                samples[i].info["sil_solve_count"] = t.solve_count
        n = sum(len(t.grades) for t in trials)
        self.trials_total += n
        self.last_stats = {
            "trials": float(n),
            "trials_total": float(self.trials_total),
            "trials_per_task": n / len(scored) if scored else 0.0,
            "solver_tokens": float(sum(t.tokens for t in trials)),
        }
        return rewards

    def step_stats(self) -> dict[str, float]:
        """The last call's solver cost: trials, trials so far, trials per valid task, solver tokens (its wall time is
        ``CombinedReward``'s ``sil/seconds``)."""
        return dict(self.last_stats)
