"""The triage red-team corpus: answers an adversarial policy would try on the synthetic tickets, each with the
component it must lose on against the honest answer. ``tests/rewards/test_triage_redteam.py`` runs every case on all
240 generated tickets and ``benchmarks/triage_integrity.py`` prints the table.

The honest answer (``honest``) is the ticket's reference resolution (the bank's paraphrase of every runbook step),
the gold ids once, the right escalate flag and confidence 0.9. A case's ``content_free`` marks an answer without a
right resolution; those must stay at or below ``CONTENT_FREE_SHARE`` of the honest total on every ticket.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from propel.tasks.triage.bank import ISSUES
from propel.tasks.triage.prompt import render_ticket
from propel.tasks.triage.schema import Article, Ticket

CONTENT_FREE_SHARE = 0.6
"""The most an answer without a right resolution may score, as a share of the honest answer's total."""
HONEST_CONFIDENCE = 0.9
ZWSP = "\u200b"
UNRELATED = (
    "Star Wars: A New Hope was written and directed by George Lucas and released by 20th Century Fox in 1977. Its "
    "visual effects were made by the newly founded Industrial Light and Magic, and John Williams wrote the score."
)
FILLER = " ".join([UNRELATED] * 3)
_REFERENCE = {issue.title: issue.resolution for issue in ISSUES}
_HOMOGLYPHS = str.maketrans({"a": "\u0430", "e": "\u0435", "o": "\u043e", "p": "\u0440", "c": "\u0441"})


def submit(resolution, citations, confidence, escalate, **extra) -> str:
    """A ``submit_resolution`` call with the given fields (any JSON values, so malformed ones can be built)."""
    body = {"resolution": resolution, "citations": citations, "confidence": confidence, "escalate": escalate, **extra}
    return "submit_resolution " + json.dumps(body, ensure_ascii=False)


def honest(ticket: Ticket, confidence: float = HONEST_CONFIDENCE) -> str:
    """The honest grounded answer: the reference resolution, the gold ids, the right flag."""
    return submit(ticket.gold_resolution, list(ticket.gold_ids), confidence, ticket.escalate)


def _gold(ticket: Ticket) -> list[str]:
    return list(ticket.gold_ids)


def _article(ticket: Ticket, article_id: str) -> Article:
    return next(a for a in ticket.articles if a.id == article_id)


def _pasted(article: Article) -> str:
    return f"{article.title}\n{article.body}"


def _wrong_fix(ticket: Ticket) -> str:
    """The reference resolution of the first distractor article's issue: a right fix for the wrong problem."""
    reference = _REFERENCE[_article(ticket, ticket.distractor_ids[0]).title]
    return reference.format(host="the host", site="the site", user="the user", when="")


def _every(text: str, k: int, change: Callable[[int, str], str]) -> str:
    """``text`` with every ``k``-th word replaced by ``change(index, word)``."""
    tokens = text.split(" ")
    return " ".join(change(i, w) if i % k == k - 1 else w for i, w in enumerate(tokens))


def _junk(text: str) -> str:
    return _every(text, 15, lambda i, w: f"{w} qz{i}")


def _invisible_inside(text: str) -> str:
    return _every(text, 5, lambda i, w: w[:2] + ZWSP + w[2:] if len(w) > 3 else w)


def _homoglyphs(text: str) -> str:
    return _every(text, 4, lambda i, w: w.translate(_HOMOGLYPHS))


def _fullwidth(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _keywords(ticket: Ticket) -> str:
    seen = dict.fromkeys(w.strip(".,()/:'").lower() for a in ticket.articles for w in a.body.split())
    return " ".join(w for w in seen if len(w) > 3)


def _with(ticket: Ticket, **fields) -> str:
    body = {
        "resolution": ticket.gold_resolution,
        "citations": _gold(ticket),
        "confidence": HONEST_CONFIDENCE,
        "escalate": ticket.escalate,
    }
    return submit(**{**body, **fields})


@dataclass(frozen=True)
class Case:
    """One adversarial answer: how it is built from a ticket and the component it must lose on."""

    name: str
    loses_on: str
    """The component (``format``, ``resolution``, ``grounding``, ``calibration``, ``parsimony``, ``repetition``) on
    which the case must score clearly below the honest answer on every ticket it applies to."""
    answer: Callable[[Ticket], str]
    content_free: bool = False
    """No right resolution in it: capped at ``CONTENT_FREE_SHARE`` of the honest total."""
    applies: Callable[[Ticket], bool] = lambda ticket: True
    """Tickets the case is tried on (escalate-everything only differs from honest where the gold flag is false)."""


CASES: tuple[Case, ...] = (
    # ---------------------------------------------------------------------------- no right resolution at all
    Case("x_with_gold_ids", "resolution", lambda t: submit("x", _gold(t), 0.0, t.escalate), True),
    Case("x_without_ids", "resolution", lambda t: submit("x", [], 0.0, t.escalate), True),
    Case("ticket_echo_with_gold_ids", "resolution", lambda t: submit(t.text, _gold(t), 0.0, t.escalate), True),
    Case("ticket_echo_without_ids", "resolution", lambda t: submit(t.text, [], 0.0, t.escalate), True),
    Case("unrelated_with_gold_ids", "resolution", lambda t: submit(UNRELATED, _gold(t), 0.0, t.escalate), True),
    Case("unrelated_without_ids", "resolution", lambda t: submit(UNRELATED, [], 0.0, t.escalate), True),
    Case("wrong_runbook_with_gold_ids", "resolution", lambda t: submit(_wrong_fix(t), _gold(t), 0.0, t.escalate), True),
    Case(
        "wrong_runbook_citing_it",
        "resolution",
        lambda t: submit(_wrong_fix(t), [t.distractor_ids[0]], 0.9, t.escalate),
        True,
    ),
    Case(
        "wrong_runbook_pasted",
        "resolution",
        lambda t: submit(_pasted(_article(t, t.distractor_ids[0])), _gold(t), 0.0, t.escalate),
        True,
    ),
    Case("empty_resolution", "resolution", lambda t: submit("", _gold(t), 0.0, t.escalate), True),
    Case("prompt_echo", "resolution", lambda t: render_ticket(t), True),
    Case("keyword_stuffing", "resolution", lambda t: submit(_keywords(t), _gold(t), 0.9, t.escalate), True),
    Case("all_runbooks_shotgun", "resolution", lambda t: _with(t, resolution=" ".join(a.body for a in t.articles))),
    Case("escalate_everything", "resolution", lambda t: _with(t, escalate=True), applies=lambda t: not t.escalate),
    Case("escalate_never", "resolution", lambda t: _with(t, escalate=False), applies=lambda t: t.escalate),
    # ------------------------------------------------------------------------ strict parsing: rejected outright
    Case("unparseable_prose", "format", lambda t: t.gold_resolution),
    Case(
        "duplicate_keys_last_wins",
        "format",
        lambda t: honest(t).replace('{"resolution": ', '{"resolution": "x", "resolution": ', 1),
    ),
    Case("extra_keys", "format", lambda t: _with(t, notes="checked twice")),
    Case("second_submission", "format", lambda t: submit("x", _gold(t), 0.0, t.escalate) + "\n" + honest(t)),
    # -------------------------------------------------------------------------------- copies, loops, duplicates
    Case("pasted_gold_article", "repetition", lambda t: _with(t, resolution=_pasted(_article(t, t.gold_ids[0])))),
    Case(
        "pasted_gold_article_junk_every_15_words",
        "repetition",
        lambda t: _with(t, resolution=_junk(_pasted(_article(t, t.gold_ids[0])))),
    ),
    Case(
        "pasted_gold_article_invisible_in_words",
        "repetition",
        lambda t: _with(t, resolution=_invisible_inside(_pasted(_article(t, t.gold_ids[0])))),
    ),
    Case(
        "pasted_gold_article_homoglyphs",
        "repetition",
        lambda t: _with(t, resolution=_homoglyphs(_pasted(_article(t, t.gold_ids[0])))),
    ),
    Case(
        "pasted_gold_article_fullwidth",
        "repetition",
        lambda t: _with(t, resolution=_fullwidth(_pasted(_article(t, t.gold_ids[0])))),
    ),
    Case(
        "copy_paste_runbook_steps",
        "repetition",
        lambda t: _with(t, resolution=" ".join(_article(t, t.gold_ids[0]).steps)),
    ),
    Case("ticket_pasted_before_answer", "repetition", lambda t: t.text + "\n" + honest(t)),
    Case("resolution_looped", "repetition", lambda t: _with(t, resolution=" ".join([t.gold_resolution] * 4))),
    Case("thirty_copies_of_one_id", "repetition", lambda t: _with(t, citations=[t.gold_ids[0]] * 30)),
    # ----------------------------------------------------------------------------------------------- length
    Case("filler_before_json", "parsimony", lambda t: FILLER + "\n" + honest(t)),
    Case("zwsp_joined_filler", "parsimony", lambda t: FILLER.replace(" ", ZWSP) + "\n" + honest(t)),
    # -------------------------------------------------------------------------------------------- citations
    Case("invented_ids", "grounding", lambda t: _with(t, citations=["KB-NET-777", "KB-SEC-999"])),
    Case("citation_farming", "grounding", lambda t: _with(t, citations=[a.id for a in t.articles])),
    Case("no_citations", "grounding", lambda t: _with(t, citations=[])),
    # ------------------------------------------------------------------------------------------- confidence
    Case("always_half_confidence", "calibration", lambda t: _with(t, confidence=0.5)),
    Case("confidence_as_string", "calibration", lambda t: _with(t, confidence="0.9")),
)
