"""Any propel reward as a TRL reward function: ``as_trl_reward(reward)`` goes into ``GRPOTrainer(reward_funcs=[...])``.

Each call rebuilds propel ``Sample``s from TRL's inputs (``propel.rewards.trl_io.trl_samples``): the row's prompt and
gold data (build the TRL dataset with ``trl_row`` so nested data such as a test suite arrives intact in
``propel_data``), the decoded completion and its ids. A ``scorer`` scores them first where the reward reads its
verdict (``ProbeReward`` reads ``valid`` and the rendered task: ``GeneratorScorer(domain)``); the test-suite and triage
rewards read the completion and the gold data themselves. The reward's ``setup`` runs once, at the first call, with
``setup`` (a ``RewardContext``: e.g. the frozen reference for a probe artifact). A ``CombinedReward`` returns its total;
its components, the values a component logs beside them (``logged_values``: e.g. ``format_raw``) and what a
component reports with ``step_stats``, go to TRL's ``log_metric`` as ``<name>/<component>`` (TRL logs them next to its
own metrics). A sample the reward could not judge (NaN) is returned as None, TRL's own "unscorable": TRL leaves a
completion that every reward function returned None for out of its group's baseline and zeroes its advantage, where
a NaN would poison the whole group.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch

from propel.rewards.combine import CombinedReward
from propel.rewards.reward import RewardComponent, RewardContext
from propel.rewards.trl_io import trl_samples
from propel.rollouts.scorer import Scorer


def _trl_values(values) -> list[float | None]:
    """Rewards as TRL takes them: floats, None where nothing was judged (NaN or an infinity)."""
    out = [float(v) for v in torch.as_tensor(values, dtype=torch.float32).reshape(-1)]
    return [v if math.isfinite(v) else None for v in out]


def as_trl_reward(
    reward: RewardComponent | CombinedReward,
    scorer: Scorer | None = None,
    setup: RewardContext | None = None,
    tokenizer=None,
    name: str | None = None,
) -> Callable[..., list[float | None]]:
    """A function ``reward_func(prompts, completions, completion_ids=None, **kwargs) -> list[float]`` (TRL's
    signature) giving ``reward``'s values on TRL's inputs (None where it judged nothing).

    Args:
        reward: a reward component, or several combined (the total is returned).
        scorer: scores the samples before the reward reads them (opened at the first call; close it yourself).
        setup: what ``reward.setup`` gets at the first call (default: an empty ``RewardContext``).
        tokenizer: renders chat prompts into ``Sample.prompt`` (rewards that read the prompt text).
        name: the function's ``__name__`` (TRL's name for the reward in its logs); default: the reward's name.
    """
    state = {"ready": False}
    label = name or getattr(reward, "name", "propel")

    def reward_func(prompts, completions, completion_ids=None, **kwargs: Any) -> list[float | None]:
        if not state["ready"]:
            reward.setup(setup or RewardContext())
            if scorer is not None:
                scorer.open()
            state["ready"] = True
        samples = trl_samples(prompts, completions, completion_ids, kwargs, tokenizer)
        if scorer is not None:
            scorer.score(samples)
        log_metric = kwargs.get("log_metric")
        if isinstance(reward, CombinedReward):
            breakdown = reward(samples)
            if log_metric is not None:
                for component, values in {**breakdown.components, **breakdown.logged}.items():
                    seen = values[torch.isfinite(values)]
                    if seen.numel():
                        log_metric(f"{label}/{component}", float(seen.mean()))
                for key, value in breakdown.extras.items():
                    log_metric(f"{label}/{key}", float(value))
            return _trl_values(breakdown.total)
        values = reward(samples)
        if log_metric is not None and hasattr(reward, "step_stats"):
            for key, value in reward.step_stats().items():
                log_metric(f"{label}/{key}", float(value))
        return _trl_values(values)

    reward_func.__name__ = reward_func.__qualname__ = label
    return reward_func
