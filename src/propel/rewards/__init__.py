"""Rewards: named, weighted components combined into one scalar per sample; probe-based rewards for PROPEL and the
validity gate alone (its ablation); the test-suite reward with its hack penalty; the six IT-triage components;
reasoning-gym's verifiers; a verifiers environment's rubric (``VerifiersRubric``); TRL-style reward functions in propel
(``TRLRewardFunction``) and propel rewards in TRL (``as_trl_reward``)."""

from propel.rewards.code_tests import TestSuitePart, TestSuiteReward
from propel.rewards.combine import CombinedReward, RewardBreakdown
from propel.rewards.episode import EnvironmentReward, OverlongPenalty, TurnRewards
from propel.rewards.gym import ReasoningGymReward
from propel.rewards.probe_reward import PROBE_MODES, MinProbe, ProbeReward, constrained, worst_case
from propel.rewards.reward import FunctionReward, Reward, RewardComponent, RewardContext
from propel.rewards.triage import (
    CitationGrounding,
    Parsimony,
    RepetitionPenalty,
    TriageCalibration,
    TriageFormat,
    TriageResolution,
    triage_rewards,
)
from propel.rewards.trl_export import as_trl_reward
from propel.rewards.trl_function import TRLRewardFunction
from propel.rewards.validity import ValidityReward
from propel.rewards.verifiers_rubric import VerifiersRubric

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
    "ReasoningGymReward",
    "RewardBreakdown",
    "Reward",
    "RewardComponent",
    "RewardContext",
    "TestSuitePart",
    "TestSuiteReward",
    "TRLRewardFunction",
    "TurnRewards",
    "ValidityReward",
    "VerifiersRubric",
    "as_trl_reward",
    "constrained",
    "worst_case",
]
