"""RVPSelection: reward variance under the base policy, for picking a probe and checking one before RL starts.

Give it the run's own reward component (e.g. the ``ProbeReward`` GRPO trains on, whose gate is
``propel.probes.gate.gated_reward``) and the variance is that of the exact RL reward, gate included. The same
sample checks, before the first step, that valid generations out-score the reward's invalid floor.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import torch
from lightning.pytorch import Callback
from torch import Tensor

from propel.callbacks.reward_floor import act_on_floor, check_action
from propel.probes.gate import check_floor
from propel.probes.selection import rvp
from propel.records import Sample
from propel.rewards.reward import RewardComponent

RewardFn = Callable[[list[str]], Tensor] | RewardComponent
"""Texts -> rewards, or a reward component (samples -> rewards, e.g. a ``ProbeReward``)."""


def _load_generations(generations) -> list[list[str]]:
    if isinstance(generations, (str, Path)):
        generations = json.loads(Path(generations).read_text())
    groups = [list(g) for g in generations]
    if not groups or len({len(g) for g in groups}) != 1 or len(groups[0]) == 0:
        raise ValueError("generations: need a non-empty [num_contexts][G] list with the same G for every context")
    return groups


class RVPSelection(Callback):
    """Score reward functions on a fixed sample of base-policy generations by their RVP.

    Args:
        generations: ``[num_contexts][G]`` texts sampled from the base policy (or a JSON file holding that list).
        reward_fn: the exact RL reward (gates included), scored at fit start: a reward component such as the run's
            ``ProbeReward`` (it sees each generation as a ``Sample`` with its validity), or a callable texts ->
            rewards.
        candidates: named reward functions (one per candidate probe) to rank with ``select``.
        valid: ``[num_contexts][G]`` validity of the generations, read by reward components' gates (default: all
            valid).
        min_within: warn at fit start when the within-group variance is below this (a near-constant reward).
        floor_action: when ``reward_fn`` has a ``floor`` (``ProbeReward``) and more than
            ``probes.gate.MAX_BELOW`` of the sample's valid generations score below it at fit start: ``warn``
            (default) or ``stop`` (warn, then end training).
        log_prefix: metric name prefix.
    """

    def __init__(
        self,
        generations: Sequence[Sequence[str]] | str,
        reward_fn: RewardFn | None = None,
        candidates: Mapping[str, RewardFn] | None = None,
        valid: Sequence[Sequence[bool]] | None = None,
        min_within: float = 1e-4,
        log_prefix: str = "rvp",
        floor_action: str = "warn",
    ):
        self.generations = _load_generations(generations)
        if reward_fn is None and not candidates:
            raise ValueError("RVPSelection: give reward_fn (checked at fit start) and/or candidates (ranked by select)")
        flags = [[True] * len(g) for g in self.generations] if valid is None else [list(v) for v in valid]
        if [len(v) for v in flags] != [len(g) for g in self.generations]:
            raise ValueError("valid: must have the [num_contexts][G] shape of generations")
        self.samples = [
            Sample(prompt="", completion=text, valid=bool(ok))
            for group, oks in zip(self.generations, flags, strict=True)
            for text, ok in zip(group, oks, strict=True)
        ]
        self.reward_fn = reward_fn
        self.candidates = dict(candidates or {})
        self.min_within = min_within
        self.log_prefix = log_prefix
        self.floor_action = check_action(floor_action)
        self.floor_check = None
        """The fit-start ``FloorCheck`` of ``reward_fn`` (None until then, or when it has no floor)."""
        self.results: dict[str, tuple[float, float]] = {}

    def rewards(self, reward_fn: RewardFn) -> Tensor:
        """``reward_fn``'s rewards [num_contexts * G] of the sample."""
        if isinstance(reward_fn, RewardComponent):
            rewards = reward_fn(self.samples)
        else:
            rewards = reward_fn([s.completion for s in self.samples])
        return torch.as_tensor(rewards, dtype=torch.float64).reshape(-1)

    def score(self, reward_fn: RewardFn) -> tuple[float, float]:
        """``(overall, within)`` variance of ``reward_fn`` over the sample."""
        return rvp(self.rewards(reward_fn).reshape(len(self.generations), -1))

    def select(self, candidates: Mapping[str, RewardFn] | None = None) -> str:
        """Name of the candidate with the highest overall RVP (scores kept in ``results``)."""
        candidates = dict(candidates or self.candidates)
        if not candidates:
            raise ValueError("candidates: give at least one named reward function to select from")
        for name, fn in candidates.items():
            self.results[name] = self.score(fn)
        return max(candidates, key=lambda name: self.results[name][0])

    def on_fit_start(self, trainer, pl_module) -> None:
        metrics = {}
        if self.reward_fn is not None:
            rewards = self.rewards(self.reward_fn)
            overall, within = self.results["reward_fn"] = rvp(rewards.reshape(len(self.generations), -1))
            floor = getattr(self.reward_fn, "floor", None)
            if floor is not None:
                valid = torch.tensor([s.valid for s in self.samples])
                self.floor_check = check_floor(rewards, valid, floor, getattr(self.reward_fn, "floor_margin", 0.0))
                metrics.update(self.floor_check.metrics(f"{self.log_prefix}/floor"))
                act_on_floor(self.floor_check, "RVP sample at fit start", self.floor_action, trainer)
            metrics.update({f"{self.log_prefix}/overall": overall, f"{self.log_prefix}/within": within})
            if within < self.min_within:
                from lightning.pytorch.utilities import rank_zero_warn

                rank_zero_warn(
                    f"RVP within-group variance {within:.2e} < {self.min_within}: the reward is nearly "
                    "constant across each group, so GRPO gets almost no signal"
                )
        if self.candidates:
            best = self.select()
            metrics.update({f"{self.log_prefix}/{name}/overall": r[0] for name, r in self.results.items()})
            self.selected = best
        if metrics and trainer.logger is not None:
            trainer.logger.log_metrics(metrics, step=trainer.global_step)
