"""What a triage ticket is: the ticket, the articles retrieved for it (gold and distractors), and its gold answer.

One row per ticket, the same in Parquet and JSONL (``COLUMNS``): ``articles`` is a list of ``{id, title, body}``;
``gold_ids`` are the ids of the articles that resolve the ticket, the first being the runbook whose steps a right
resolution covers; ``distractor_ids`` are the other retrieved ones. A reward grades against
``Ticket.grading_data()``, the context's gold ``data``.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from propel.errors import ConfigError

REQUIRED = ("ticket_id", "subject", "body", "articles", "gold_ids", "gold_resolution", "escalate")
"""Columns a user's own ticket file must have."""
OPTIONAL = ("category", "distractor_ids")
"""Columns filled in when absent: ``category`` = ``general``, ``distractor_ids`` = the non-gold articles."""
COLUMNS = ("ticket_id", "category", "subject", "body", "articles", "gold_ids", "distractor_ids")
COLUMNS += ("gold_resolution", "escalate")
_LISTED = re.compile(r"^\s*(?:\d+[.)]|[-*\u2022])\s+(.+?)\s*$")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def split_steps(text: str) -> tuple[str, ...]:
    """The steps of a procedure: its numbered or bulleted lines when it has at least two, else its sentences (a
    prose article or a reference resolution)."""
    listed = [m.group(1) for m in map(_LISTED.match, text.splitlines()) if m]
    if len(listed) >= 2:
        return tuple(listed)
    return tuple(s.strip() for s in _SENTENCE.split(text.strip()) if s.strip())


@dataclass(frozen=True)
class Article:
    """One retrieved knowledge-base article."""

    id: str
    """Stable id the model cites (e.g. ``KB-NET-004``)."""
    title: str
    body: str

    @property
    def steps(self) -> tuple[str, ...]:
        """The article's steps (``split_steps`` of the body): what the resolution reward matches answers against."""
        return split_steps(self.body)


@dataclass(frozen=True)
class Ticket:
    """One IT ticket with its retrieved articles and gold answer."""

    ticket_id: str
    category: str
    """``networking``, ``security``, ``cloud``, ``infrastructure`` (synthetic set) or any label of the user's."""
    subject: str
    body: str
    articles: tuple[Article, ...]
    """What retrieval put in the prompt, in prompt order: the gold articles and the distractors, shuffled."""
    gold_ids: tuple[str, ...]
    """Articles that resolve the ticket (a subset of the articles' ids; may be empty). The first is the runbook: a
    right resolution covers its steps (later ones, e.g. an escalation policy, are cited, not required as steps)."""
    gold_resolution: str
    """A reference resolution: its sentences are the steps to cover when there is no gold article; ROUGE-L against
    it is logged as a diagnostic."""
    escalate: bool
    """Whether the right call is to escalate (e.g. a security incident, a hardware failure)."""
    distractor_ids: tuple[str, ...] = field(default=())
    """Retrieved articles that do not resolve the ticket (the article ids not in ``gold_ids``)."""

    def __post_init__(self) -> None:
        ids = [a.id for a in self.articles]
        if len(set(ids)) != len(ids):
            raise ConfigError(f"ticket {self.ticket_id}: article ids must be unique, got {ids}")
        unknown = [g for g in self.gold_ids if g not in ids]
        if unknown:
            raise ConfigError(f"ticket {self.ticket_id}: gold_ids {unknown} are not among its articles {ids}")
        if not self.distractor_ids:
            object.__setattr__(self, "distractor_ids", tuple(i for i in ids if i not in self.gold_ids))
        wrong = [d for d in self.distractor_ids if d not in ids or d in self.gold_ids]
        if wrong:
            raise ConfigError(f"ticket {self.ticket_id}: distractor_ids {wrong} must be non-gold article ids")

    @property
    def text(self) -> str:
        """The ticket as the user wrote it (subject and body): what parsimony's length budget is tied to."""
        return f"{self.subject}\n{self.body}"

    @property
    def gold_steps(self) -> tuple[str, ...]:
        """The steps a right resolution covers: the runbook's (the first gold article), or the reference
        resolution's sentences for a ticket without a gold article."""
        if not self.gold_ids:
            return split_steps(self.gold_resolution)
        return next(a for a in self.articles if a.id == self.gold_ids[0]).steps

    @property
    def distractor_steps(self) -> tuple[str, ...]:
        """Every step of the retrieved articles that do not resolve the ticket (following one is a wrong fix)."""
        return tuple(step for a in self.articles if a.id in self.distractor_ids for step in a.steps)

    def grading_data(self) -> dict[str, Any]:
        """The gold data the triage rewards read (``sample.context.data``)."""
        return {
            "ticket_id": self.ticket_id,
            "category": self.category,
            "ticket": self.text,
            "article_ids": [a.id for a in self.articles],
            "articles_text": "\n".join(f"{a.title}\n{a.body}" for a in self.articles),
            "gold_ids": list(self.gold_ids),
            "gold_resolution": self.gold_resolution,
            "gold_steps": list(self.gold_steps),
            "distractor_steps": list(self.distractor_steps),
            "escalate": bool(self.escalate),
        }

    def to_row(self) -> dict[str, Any]:
        row = asdict(self)
        row["articles"] = [asdict(a) for a in self.articles]
        row["gold_ids"], row["distractor_ids"] = list(self.gold_ids), list(self.distractor_ids)
        return row

    @classmethod
    def from_row(cls, row: dict[str, Any], where: str = "row") -> Ticket:
        """A ticket from one Parquet/JSONL row; a missing column or a wrong type is one ``ConfigError`` line."""
        missing = [c for c in REQUIRED if c not in row or row[c] is None]
        if missing:
            raise ConfigError(f"{where}: missing column(s) {missing}; a triage ticket needs {list(REQUIRED)}")
        articles = []
        for a in _as_list(row["articles"], "articles", where):
            if not isinstance(a, dict) or not {"id", "title", "body"} <= set(a):
                raise ConfigError(f"{where}: each entry of 'articles' needs id, title and body, got {a!r}")
            articles.append(Article(str(a["id"]), str(a["title"]), str(a["body"])))
        escalate = row["escalate"]
        if not isinstance(escalate, bool) and str(escalate).lower() not in ("true", "false", "0", "1"):
            raise ConfigError(f"{where}: 'escalate' must be a boolean, got {escalate!r}")
        return cls(
            ticket_id=str(row["ticket_id"]),
            category=str(row.get("category") or "general"),
            subject=str(row["subject"]),
            body=str(row["body"]),
            articles=tuple(articles),
            gold_ids=tuple(str(g) for g in _as_list(row["gold_ids"], "gold_ids", where)),
            gold_resolution=str(row["gold_resolution"]),
            escalate=escalate if isinstance(escalate, bool) else str(escalate).lower() in ("true", "1"),
            distractor_ids=tuple(str(d) for d in _as_list(row.get("distractor_ids") or [], "distractor_ids", where)),
        )


def _as_list(value: Any, column: str, where: str) -> list:
    """Parquet gives numpy arrays, JSONL gives lists: both become a list."""
    if hasattr(value, "tolist"):
        value = value.tolist()
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{where}: column {column!r} must be a list, got {type(value).__name__}")
    return list(value)
