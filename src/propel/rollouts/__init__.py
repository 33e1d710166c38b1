"""Rollouts: the record of what a policy did (``Sample``, ``Turn``), how it is produced (single-turn generation,
scored by an environment) and how it becomes training tensors (``pack``)."""

from propel.rollouts.environment import Environment, GeneratorEnv
from propel.rollouts.packing import PackedBatch, pack
from propel.rollouts.record import Sample, Turn
from propel.rollouts.single_turn import generate_tasks, sample_single_turn
from propel.rollouts.steps import ContextBatch, RolloutSource

__all__ = [
    "ContextBatch",
    "Environment",
    "GeneratorEnv",
    "PackedBatch",
    "RolloutSource",
    "Sample",
    "Turn",
    "generate_tasks",
    "pack",
    "sample_single_turn",
]
