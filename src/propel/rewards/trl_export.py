"""Any propel reward as a TRL reward function: ``as_trl_reward(reward)`` goes into ``GRPOTrainer(reward_funcs=[...])``.

Each call rebuilds propel ``Sample``s from TRL's inputs (``propel.rewards.trl_io.trl_samples``): the row's prompt and
gold data (build the TRL dataset with ``trl_row`` so nested data such as a test suite arrives intact in
``propel_data``), the decoded completion and its ids. A ``scorer`` scores them first where the reward reads its
verdict (``ProbeReward`` reads ``valid`` and the rendered task: ``GeneratorScorer(domain)``); the test-suite and triage
rewards read the completion and the gold data themselves. The reward's ``setup`` runs once, at the first call, with
``setup`` (a ``RewardContext``: e.g. the frozen reference for a probe artifact). A ``CombinedReward`` returns its total;
its components, the values a component logs beside them (``logged_values``: e.g. ``format_raw``) and what a
component reports with ``step_stats``, go to TRL's ``log_metric`` as ``<name>/<component>`` (TRL logs them next to its
own metrics).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from propel.rewards.combine import CombinedReward
from propel.rewards.reward import RewardComponent, RewardContext
from propel.rewards.trl_io import trl_samples
from propel.rollouts.scorer import Scorer


def as_trl_reward(
    reward: RewardComponent | CombinedReward,
    scorer: Scorer | None = None,
    setup: RewardContext | None = None,
    tokenizer=None,
    name: str | None = None,
) -> Callable[..., list[float]]:
    """A function ``reward_func(prompts, completions, completion_ids=None, **kwargs) -> list[float]`` (TRL's
    signature) giving ``reward``'s values on TRL's inputs.

    Args:
        reward: a reward component, or several combined (the total is returned).
        scorer: scores the samples before the reward reads them (opened at the first call; close it yourself).
        setup: what ``reward.setup`` gets at the first call (default: an empty ``RewardContext``).
        tokenizer: renders chat prompts into ``Sample.prompt`` (rewards that read the prompt text).
        name: the function's ``__name__`` (TRL's name for the reward in its logs); default: the reward's name.
    """
    state = {"ready": False}
    label = name or getattr(reward, "name", "propel")

    def reward_func(prompts, completions, completion_ids=None, **kwargs: Any) -> list[float]:
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
                    log_metric(f"{label}/{component}", float(values.mean()))
                for key, value in breakdown.extras.items():
                    log_metric(f"{label}/{key}", float(value))
            return [float(v) for v in breakdown.total]
        values = reward(samples)
        if log_metric is not None and hasattr(reward, "step_stats"):
            for key, value in reward.step_stats().items():
                log_metric(f"{label}/{key}", float(value))
        return [float(v) for v in values]

    reward_func.__name__ = reward_func.__qualname__ = label
    return reward_func
