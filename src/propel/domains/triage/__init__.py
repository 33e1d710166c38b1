"""IT-ticket triage over retrieved articles (seed 003): the ticket schema, a reproducible synthetic set, a loader
for a user's own tickets, the prompt, and the ``submit_resolution`` parser the triage rewards grade with."""

from propel.domains.triage.generate import generate_tickets, knowledge_base
from propel.domains.triage.io import load_tickets, write_jsonl, write_parquet
from propel.domains.triage.parse import FIELDS, Submission, parse_submission
from propel.domains.triage.prompt import render_ticket, triage_prompt
from propel.domains.triage.schema import Article, Ticket
from propel.domains.triage.tasks import TriageTickets, split_of, ticket_context

__all__ = [
    "FIELDS",
    "Article",
    "Submission",
    "Ticket",
    "TriageTickets",
    "generate_tickets",
    "knowledge_base",
    "load_tickets",
    "parse_submission",
    "render_ticket",
    "split_of",
    "ticket_context",
    "triage_prompt",
    "write_jsonl",
    "write_parquet",
]
