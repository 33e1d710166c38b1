"""Task sources: ``contexts(n, seed)`` of graded problems for single-turn RL on verifiable rewards (reasoning-gym's
procedural datasets, mixed by weight)."""

from propel.tasks.gym import GymDataset, ReasoningGymTasks, answer_tag, extract_answer, gym_dataset

__all__ = ["GymDataset", "ReasoningGymTasks", "answer_tag", "extract_answer", "gym_dataset"]
