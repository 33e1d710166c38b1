"""The oracle reward: a valid task's exact expected utility to the solver, the signal PROPEL's probe predicts.

Where the domain can say what the right answer looks like (``Domain.answer_text``), the solver's probability ``p``
of one correct attempt is computed by teacher forcing (``propel.domains.exact_trials``), and the reward of a valid
task is ``P(lo <= Bin(n_trials, p) <= hi)``: the in-band label's expected value, without sampling a single trial.
It is the ceiling of what any predictor of the in-band label can pay (the PROPEL paper's solver-in-the-loop without
its sampling noise), at one solver forward pass per valid task.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from propel.domains.exact_trials import band_utility, solve_probabilities
from propel.domains.interface import Domain
from propel.domains.trials import SolverSpec
from propel.engines.engine import Engine
from propel.records import Sample
from propel.rewards.reward import RewardContext, ValidTaskReward


class ExactUtilityReward(ValidTaskReward):
    """Reward = a valid task's exact band utility for the solver; invalid -> the floor.

    Args:
        domain: the task domain; it must implement ``answer_text`` (math few-shot, letter counting).
        solver: the solver and its band (``n_trials``, ``band``, ``temperature``, ``top_p``): labeling's settings.
        engine: a local HF engine holding the solver; None loads ``solver.model`` (or the policy's base model) at
            ``setup`` as a separate frozen copy, never the policy being trained.
        engine_kwargs: arguments of that engine.
        floor: reward of invalid samples; below 0, the worst valid utility.
        name: component name for logging.
        weight: weight in a ``CombinedReward``.
    """

    def __init__(
        self,
        domain: Domain,
        solver: SolverSpec | None = None,
        engine: Engine | None = None,
        engine_kwargs: dict[str, Any] | None = None,
        floor: float = -1.0,
        name: str = "utility",
        weight: float = 1.0,
    ) -> None:
        super().__init__(floor, name, weight, zero_means="a valid task of utility 0")
        self.domain, self.solver, self.engine = domain, solver or SolverSpec(), engine
        self.engine_kwargs = dict(engine_kwargs or {})
        self.last_stats: dict[str, float] = {}

    def setup(self, context: RewardContext) -> None:
        if self.engine is None:
            from propel.engines.factory import make_engine

            name = self.solver_model(self.solver.model, context.model_name, "ExactUtilityReward")
            self.engine = make_engine("hf", name, **self.engine_kwargs)

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        rewards = torch.full((len(samples),), self._floor, dtype=torch.float32)
        scored = self.graded(samples)
        if scored and self.engine is None:
            self.setup(RewardContext())
        ps = (
            solve_probabilities(
                self.domain,
                [samples[i].task for i in scored],
                self.engine,
                temperature=self.solver.temperature,
                top_p=self.solver.top_p,
            )
            if scored
            else []
        )
        for i, p in zip(scored, ps, strict=True):
            if p is None:
                raise ValueError(f"{type(self.domain).__name__} gives no answer text for {samples[i].task_text!r}")
            rewards[i] = band_utility(p, self.solver.n_trials, self.solver.band)
            samples[i].info["exact_p"] = p
        self.last_stats = {"mean_p": float(sum(ps) / len(ps))} if ps else {}
        return rewards

    def step_stats(self) -> dict[str, float]:
        """The last call's mean exact solve probability over valid tasks."""
        return dict(self.last_stats)
