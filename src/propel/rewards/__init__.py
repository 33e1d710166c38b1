"""Rewards: named, weighted components combined into one scalar per sample; probe-based rewards for PROPEL."""

from propel.rewards.base import FunctionReward, Reward, RewardComponent, RewardContext
from propel.rewards.combine import CombinedReward, RewardBreakdown
from propel.rewards.episode import EnvironmentReward, OverlongPenalty
from propel.rewards.probe import PROBE_MODES, MinProbe, ProbeReward, constrained, worst_case

__all__ = [
    "PROBE_MODES",
    "CombinedReward",
    "EnvironmentReward",
    "FunctionReward",
    "MinProbe",
    "OverlongPenalty",
    "ProbeReward",
    "RewardBreakdown",
    "Reward",
    "RewardComponent",
    "RewardContext",
    "constrained",
    "worst_case",
]
