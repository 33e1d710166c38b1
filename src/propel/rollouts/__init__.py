"""Rollouts: how the record of what a policy did (``propel.records.Sample``) is produced (single-turn generation
scored by a ``Scorer``; multi-turn agent episodes run by ``EpisodeRunner``) and how it becomes training tensors
(``pack``) or files (``write_trajectories``)."""

from propel.rollouts.agent_trials import AgentEpisodes, AgentSolver
from propel.rollouts.episode_runner import EpisodeRunner
from propel.rollouts.packing import PackedBatch, pack
from propel.rollouts.scorer import GeneratorScorer, Scorer
from propel.rollouts.single_turn import generate_tasks, sample_single_turn
from propel.rollouts.steps import ContextBatch, Rollout, RolloutSource
from propel.rollouts.trajectories import read_trajectories, write_trajectories

__all__ = [
    "AgentEpisodes",
    "AgentSolver",
    "ContextBatch",
    "Scorer",
    "EpisodeRunner",
    "GeneratorScorer",
    "PackedBatch",
    "Rollout",
    "RolloutSource",
    "generate_tasks",
    "pack",
    "read_trajectories",
    "sample_single_turn",
    "write_trajectories",
]
