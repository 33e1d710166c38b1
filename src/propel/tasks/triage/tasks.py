"""Triage tickets as a task source for single-turn GRPO: ``contexts(n, seed)``, deterministic in the seed."""

from __future__ import annotations

import random
import zlib
from dataclasses import replace

from propel.errors import ConfigError
from propel.records import Context, TaskSource
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


def fewer_distractors(ticket: Ticket, keep: int) -> Ticket:
    """``ticket`` with only the first ``keep`` of its distractor articles retrieved (prompt order kept)."""
    if not 0 <= keep <= len(ticket.distractor_ids):
        raise ConfigError(f"distractors: keep 0 to {len(ticket.distractor_ids)} per ticket, got {keep}")
    dropped = set(ticket.distractor_ids[keep:])
    articles = tuple(a for a in ticket.articles if a.id not in dropped)
    return replace(ticket, articles=articles, distractor_ids=ticket.distractor_ids[:keep])


class TriageTickets(TaskSource):
    """IT-triage tickets: a user's Parquet/JSONL file, or the synthetic set generated on the fly.

    Args:
        path: a ticket file in ``propel.tasks.triage.schema`` columns; None generates the synthetic set.
        n: synthetic tickets (when ``path`` is None).
        data_seed: the synthetic set's seed (when ``path`` is None).
        split: ``train``, ``eval`` or None (all tickets); the split is a stable hash of the ticket id.
        eval_fraction: share of tickets in ``eval``.
        categories: keep only these categories (None: all).
        distractors: keep this many of each synthetic ticket's 3 retrieved wrong runbooks (the first drawn; None:
            all 3): the same tickets with fewer articles beside the gold ones, 0 leaving the gold runbook (and
            policy) alone. The graders read what was retrieved, so fewer distractors also means fewer wrong steps
            to avoid. A ticket file keeps its own articles: setting it with ``path`` is refused (``make_dataset
            --distractors`` writes a set with another number).
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
        distractors: int | None = None,
    ) -> None:
        if split is not None and split not in SPLITS:
            raise ConfigError(f"split must be one of {SPLITS} or null, got {split!r}")
        if path is not None and distractors is not None:
            raise ConfigError(f"distractors: {path}'s tickets carry their own retrieved articles; leave it unset")
        tickets = load_tickets(path) if path is not None else generate_tickets(n, data_seed)
        if distractors is not None:
            tickets = [fewer_distractors(t, distractors) for t in tickets]
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
