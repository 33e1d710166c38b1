"""Rewards: named, weighted components combined into one scalar per sample; probe-based rewards for PROPEL; the
test-suite reward with its hack penalty; the six IT-triage components."""

from propel.rewards.base import FunctionReward, Reward, RewardComponent, RewardContext
from propel.rewards.combine import CombinedReward, RewardBreakdown
from propel.rewards.episode import EnvironmentReward, OverlongPenalty, TurnRewards
from propel.rewards.probe import PROBE_MODES, MinProbe, ProbeReward, constrained, worst_case
from propel.rewards.test_suite import TestSuitePart, TestSuiteReward
from propel.rewards.triage import (
    CitationGrounding,
    Parsimony,
    RepetitionPenalty,
    TriageCalibration,
    TriageFormat,
    TriageResolution,
    triage_rewards,
)

__all__ = [
    "CitationGrounding",
    "Parsimony",
    "RepetitionPenalty",
    "TriageCalibration",
    "TriageFormat",
    "TriageResolution",
    "triage_rewards",
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
    "TestSuitePart",
    "TestSuiteReward",
    "TurnRewards",
    "constrained",
    "worst_case",
]
