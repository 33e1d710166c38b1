"""Triage tickets as a task source for single-turn GRPO: ``contexts(n, seed)``, deterministic in the seed."""

from __future__ import annotations

import random
import zlib

from propel.domains.interface import Context
from propel.errors import ConfigError
from propel.tasks.task_source import TaskSource
from propel.tasks.triage.generate import generate_tickets
from propel.tasks.triage.io import load_tickets
from propel.tasks.triage.prompt import triage_prompt
from propel.tasks.triage.schema import Ticket

SPLITS = ("train", "eval")


def split_of(ticket_id: str, eval_fraction: float) -> str:
    """``eval`` for a stable ``eval_fraction`` of ticket ids (by CRC32, so a user's file splits the same way)."""
    return "eval" if zlib.crc32(ticket_id.encode()) % 1000 < eval_fraction * 1000 else "train"


def ticket_context(ticket: Ticket, answer_prefix: str | None = None) -> Context:
    """The prompt (ticket + retrieved articles, and the forced start of the answer when given) with the ticket's
    gold answer (and that prefix, which the graders put back in front of the completion) as ``data``."""
    data = ticket.grading_data()
    if answer_prefix:
        data["answer_prefix"] = answer_prefix
    return Context(id=ticket.ticket_id, prompt=triage_prompt(ticket, answer_prefix), group=ticket.ticket_id, data=data)


class TriageTickets(TaskSource):
    """IT-triage tickets: a user's Parquet/JSONL file, or the synthetic set generated on the fly.

    Args:
        path: a ticket file in ``propel.tasks.triage.schema`` columns; None generates the synthetic set.
        n: synthetic tickets (when ``path`` is None).
        data_seed: the synthetic set's seed (when ``path`` is None).
        split: ``train``, ``eval`` or None (all tickets); the split is a stable hash of the ticket id.
        eval_fraction: share of tickets in ``eval``.
        categories: keep only these categories (None: all).
        answer_prefix: the start of the answer, written for the model as the opening of its turn, which it then
            continues (e.g. ``submit_resolution {"resolution": "``: SmolLM2-135M then writes a gradable submission in
            7 of 16 samples, against 0 of 32 without); the graders read the prefix and the completion together, the
            policy is trained on the completion's tokens only. None: the model writes the whole answer.
    """

    def __init__(
        self,
        path: str | None = None,
        n: int = 240,
        data_seed: int = 0,
        split: str | None = "train",
        eval_fraction: float = 0.2,
        categories: list[str] | None = None,
        answer_prefix: str | None = None,
    ) -> None:
        if split is not None and split not in SPLITS:
            raise ConfigError(f"split must be one of {SPLITS} or null, got {split!r}")
        tickets = load_tickets(path) if path is not None else generate_tickets(n, data_seed)
        if split is not None:
            tickets = [t for t in tickets if split_of(t.ticket_id, eval_fraction) == split]
        if categories is not None:
            tickets = [t for t in tickets if t.category in categories]
        if not tickets:
            raise ConfigError(f"no triage tickets left (path={path}, split={split}, categories={categories})")
        self.tickets, self.answer_prefix = tickets, answer_prefix

    def draw(self, n: int, seed: int = 0) -> list[Ticket]:
        rng = random.Random(seed)
        return [rng.choice(self.tickets) for _ in range(n)]

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        return [ticket_context(t, self.answer_prefix) for t in self.draw(n, seed)]
