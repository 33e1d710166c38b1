"""The triage prompt: the ticket, the retrieved articles with their ids, and the one answer format asked for."""

from __future__ import annotations

from propel.records import Prompt
from propel.tasks.triage.schema import Ticket

INSTRUCTION = (
    "You are an IT support engineer. Resolve the ticket below using the retrieved knowledge-base articles; some of "
    "them are relevant, others are not."
)
ANSWER_FORMAT = (
    "Answer with exactly one submit_resolution call, a JSON object with four fields:\n"
    '- "resolution": the steps that fix the ticket, in a few sentences;\n'
    '- "citations": the ids of the articles you used, each once;\n'
    '- "confidence": your probability (0 to 1) that the resolution is right;\n'
    '- "escalate": true if the ticket must go to the on-call team, otherwise false.\n'
    'Format: submit_resolution {"resolution": "...", "citations": ["KB-..."], "confidence": 0.5, '
    '"escalate": false}'
)


def render_ticket(ticket: Ticket, answer_format: str = ANSWER_FORMAT) -> str:
    """The user message: instruction, ticket, ``[id] title`` + body per article, answer format (a tool-calling
    client, e.g. the OpenEnv environment, asks for the tool instead of the inline call)."""
    articles = "\n\n".join(f"[{a.id}] {a.title}\n{a.body}" for a in ticket.articles)
    return (
        f"{INSTRUCTION}\n\nTicket {ticket.ticket_id} ({ticket.category})\nSubject: {ticket.subject}\n{ticket.body}\n\n"
        f"Retrieved articles:\n\n{articles}\n\n{answer_format}"
    )


def triage_prompt(ticket: Ticket, answer_prefix: str | None = None) -> Prompt:
    """The chat prompt; with ``answer_prefix`` the assistant's turn is opened with it (the engine continues it)."""
    messages = [{"role": "user", "content": render_ticket(ticket)}]
    if answer_prefix:
        messages.append({"role": "assistant", "content": answer_prefix})
    return Prompt(messages=messages)


def answer_text(completion: str, data: dict) -> str:
    """The whole answer the graders read: the forced prefix of the context (``data["answer_prefix"]``), if any,
    followed by the completion."""
    return (data.get("answer_prefix") or "") + completion
