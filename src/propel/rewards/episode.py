"""Rewards of agent episodes: the environment's own verdict, its per-turn rewards, and DAPO's soft overlong penalty.

Both read what the policy did, never the environment's text: ``OverlongPenalty`` counts assistant tokens only
(tool output is not the policy's length; counting it punishes episodes for what a command printed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from propel.errors import ConfigError
from propel.records import Sample
from propel.rewards.reward import Reward


class EnvironmentReward(Reward):
    """The reward the episode's environment gave when it ended (its verifier: 1 solved, 0 not, or graded).

    NaN where there is no verdict: an episode lost to an infrastructure failure, or one whose environment ended it
    with a reward of None. A sample that is not an episode at all (no ``info['reward']`` key) is a set-up error.
    """

    def __init__(self, name: str = "env", weight: float = 1.0) -> None:
        self.name, self.weight = name, weight

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        missing = [i for i, s in enumerate(samples) if "reward" not in s.info and s.infra_error is None]
        if missing:
            raise ConfigError(
                f"EnvironmentReward needs agent episodes scored by their environment; sample {missing[0]} has no "
                "info['reward'] (use it with propel.datamodules.agent_episodes.EpisodeDataModule)"
            )
        verdicts = [None if s.infra_error is not None else s.info.get("reward") for s in samples]
        return torch.tensor([math.nan if v is None else float(v) for v in verdicts], dtype=torch.float32)


class TurnRewards(Reward):
    """The per-turn rewards an environment attached to an episode's observations (``Turn.info["reward"]``; e.g.
    ``ToolEnv(malformed_call_reward=-0.1)``), summed or averaged over the episode's turns.

    They enter the episode's scalar reward like any component (GRPO's advantage stays per episode); they do not
    assign credit to single turns.

    Args:
        reduce: ``sum`` over the turns that carry a reward, or ``mean`` over the episode's assistant turns.
    """

    def __init__(self, reduce: str = "sum", name: str = "turns", weight: float = 1.0) -> None:
        if reduce not in ("sum", "mean"):
            raise ConfigError(f"TurnRewards reduce must be 'sum' or 'mean', got {reduce!r}")
        self.reduce, self.name, self.weight = reduce, name, weight

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        out = []
        for s in samples:  # all_turns: a step-wise episode's earlier segments carry turn rewards too
            total = sum(float(t.info["reward"]) for t in s.all_turns if "reward" in t.info)
            actions = sum(t.trainable for t in s.all_turns)
            out.append(total / max(actions, 1) if self.reduce == "mean" else total)
        return torch.tensor(out, dtype=torch.float32)


class OverlongPenalty(Reward):
    """DAPO's soft overlong punishment (Eq. 13) on the assistant tokens of a rollout.

    0 up to ``max_length - cache``, then falling linearly to -1 at ``max_length``, and -1 beyond.

    Args:
        max_length: ``L_max``, the assistant-token budget of a whole episode.
        cache: ``L_cache``, the soft zone before it (0: a hard cut at ``max_length``).
    """

    def __init__(self, max_length: int, cache: int = 0, name: str = "overlong", weight: float = 1.0) -> None:
        if max_length < 1 or not 0 <= cache <= max_length:
            raise ConfigError(
                f"OverlongPenalty needs max_length >= 1 and 0 <= cache <= max_length, got {max_length}, {cache}"
            )
        self.max_length, self.cache, self.name, self.weight = max_length, cache, name, weight

    def penalty(self, length: int) -> float:
        soft_start = self.max_length - self.cache
        if length <= soft_start:
            return 0.0
        if length <= self.max_length:
            return (soft_start - length) / self.cache
        return -1.0

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        return torch.tensor([self.penalty(s.assistant_length) for s in samples], dtype=torch.float32)
