"""Single-turn GRPO on reasoning-gym's procedural tasks: the policy answers each question, the dataset's own
verifier scores it (``propel.rewards.ReasoningGymReward``).

``GymAnswerScorer`` only reads the answer: ``valid`` when the completion holds one (in the contexts' tag), the
topic is the item's dataset, ``sample.info["reason"]`` says ``ok`` or ``no_answer``; nothing runs, so no sandbox.
"""

from __future__ import annotations

from collections.abc import Sequence

from propel.datamodules.contexts import SingleTurnDataModule
from propel.records import Sample, TaskSource
from propel.rollouts.scorer import Scorer
from propel.tasks.gym import answer_tag, extract_answer


class GymAnswerScorer(Scorer):
    """Completion -> its extracted answer (``valid`` when there is one; the topic is the item's dataset)."""

    needs_sandbox = False

    def score(self, samples: Sequence[Sample]) -> None:
        for s in samples:
            data = s.context.data if s.context is not None else {}
            if "dataset" not in data:
                raise ValueError("GymAnswerScorer needs contexts from propel.tasks.ReasoningGymTasks")
            answer = extract_answer(s.completion, answer_tag(data))
            s.topic = data["dataset"]
            s.valid = bool(answer)
            s.info["reason"] = "ok" if s.valid else "no_answer"


class ReasoningGymDataModule(SingleTurnDataModule):
    """reasoning-gym contexts for single-turn GRPO (``tasks``: ``propel.tasks.ReasoningGymTasks``).

    Args:
        tasks: the task source; ``contexts(n, seed)`` deterministic in the seed, each context's ``data`` holding the
            item and its dataset.
        contexts_per_step: questions per step (each gets ``group_size`` answers).
        seed: stream seed.
    """

    def __init__(self, tasks: TaskSource, contexts_per_step: int = 4, seed: int = 0) -> None:
        super().__init__(tasks, GymAnswerScorer(), contexts_per_step, seed)
