"""IT-ticket triage over retrieved articles: the ticket schema, a reproducible synthetic set, a loader
for a user's own tickets, the prompt, and the ``submit_resolution`` parser the triage rewards grade with."""

from propel.tasks.triage.generate import generate_tickets, knowledge_base
from propel.tasks.triage.io import load_tickets, write_jsonl, write_parquet
from propel.tasks.triage.parse import FIELDS, Submission, parse_submission
from propel.tasks.triage.prompt import render_ticket, triage_prompt
from propel.tasks.triage.schema import Article, Ticket
from propel.tasks.triage.tasks import TriageTickets, split_of, ticket_context

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
