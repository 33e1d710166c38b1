"""Single-turn GRPO on IT-triage tickets: the policy answers one ``submit_resolution`` JSON per ticket.

``TriageScorer`` parses each answer (``valid`` when exactly one submission with four valid fields), sets the topic to
the ticket's category and records the parse verdict in ``sample.info["triage"]["reason"]``; the six triage rewards
(``propel.rewards.triage``) grade against the ticket's gold data.
"""

from __future__ import annotations

from collections.abc import Sequence

from propel.datamodules.contexts import SingleTurnDataModule
from propel.records import Sample, Task, TaskSource
from propel.rollouts.scorer import Scorer
from propel.tasks.triage.parse import parse_submission
from propel.tasks.triage.prompt import answer_text


class TriageScorer(Scorer):
    """Completion -> parsed submission (``sample.task``, domain ``triage``); nothing runs, so no sandbox."""

    needs_sandbox = False

    def score(self, samples: Sequence[Sample]) -> None:
        for s in samples:
            data = s.context.data if s.context is not None else {}
            if "gold_resolution" not in data:
                raise ValueError("TriageScorer needs contexts from propel.tasks.triage.TriageTickets (gold data)")
            answer = parse_submission(answer_text(s.completion, data))
            s.task = Task("triage", dict(answer.raw)) if answer.found else None
            s.topic = data.get("category")
            s.valid = answer.reason == "ok"
            s.info["reason"] = answer.reason
            s.info.setdefault("triage", {})["reason"] = answer.reason


class TriageDataModule(SingleTurnDataModule):
    """Ticket contexts for single-turn GRPO (``tasks``: ``propel.tasks.triage.TriageTickets``).

    Args:
        tasks: the ticket source; ``contexts(n, seed)`` deterministic in the seed, each context's ``data`` holding
            the ticket's gold answer.
        contexts_per_step: tickets per step (each gets ``group_size`` answers).
        seed: stream seed.
    """

    def __init__(self, tasks: TaskSource, contexts_per_step: int = 2, seed: int = 0) -> None:
        super().__init__(tasks, TriageScorer(), contexts_per_step, seed)
