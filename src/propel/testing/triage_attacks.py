"""The triage red-team corpus: answers an adversarial policy would try on the synthetic tickets, each with the
component it must lose on against the honest answer. ``tests/rewards/test_triage_redteam.py`` runs every case on all
240 generated tickets and ``benchmarks/triage_integrity.py`` prints the table.

The honest answer (``honest``) is the ticket's reference resolution (the bank's paraphrase of every runbook step, in
the runbook's order), the gold ids once, the right escalate flag and confidence 0.9; ``honest_paraphrase`` is the
same answer in an engineer's own words (``paraphrase``: British spellings, "wipe" for "reimage", "by hand" for
"manually", ...), which must score what the honest answer scores. A case's ``content_free`` marks an answer without
a right resolution; those must stay at or below ``CONTENT_FREE_SHARE`` of the honest total on every ticket. Word lists
of the runbook's content words and reorderings of its steps are such answers, at any confidence and flag: a procedure
is its steps in order (``rewards/triage/steps.py`` rules 5 and 8).
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass

from propel.rewards.triage.clauses import clauses
from propel.rewards.triage.steps import check_steps
from propel.rewards.triage.vocabulary import STOP_WORDS
from propel.tasks.triage.bank import ISSUES
from propel.tasks.triage.prompt import render_ticket
from propel.tasks.triage.schema import Article, Ticket
from propel.testing.triage_phrasings import NEGATIONS, REGISTERS, RETRACTIONS, framed, negated

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
JUNK = (
    "The weather in the office was pleasant today.",
    "Lunch is served in the cafeteria at noon.",
    "The quarterly newsletter goes out on Friday.",
    "Parking on level two is closed for painting.",
)
"""Unrelated sentences interleaved with steps."""
PARAPHRASE = {
    "neighbor": "neighbour",
    "reimaging": "wiping",
    "reimage": "wipe",
    "enrolling": "registering",
    "enrol": "register",
    "manually": "by hand",
    "data-centre": "data center",
    "utilisation": "utilization",
    "re-run": "rerun",
    "re-push": "repush",
    "certificate": "cert",
    "credentials": "creds",
    "temporary": "temp",
    "temp": "temporary",
    "optic": "transceiver",
    "remove": "delete",
    "ACL": "access list",
    "email": "e-mail",
    "on-call": "oncall",
    "config": "configuration",
}
"""An engineer's own words for the bank's: spelling variants and the domain's synonyms (``paraphrase``)."""
_PARAPHRASED = re.compile(r"\b(" + "|".join(sorted(map(re.escape, PARAPHRASE), key=len, reverse=True)) + r")\b", re.I)


def submit(resolution, citations, confidence, escalate, **extra) -> str:
    """A ``submit_resolution`` call with the given fields (any JSON values, so malformed ones can be built)."""
    body = {"resolution": resolution, "citations": citations, "confidence": confidence, "escalate": escalate, **extra}
    return "submit_resolution " + json.dumps(body, ensure_ascii=False)


def honest(ticket: Ticket, confidence: float = HONEST_CONFIDENCE) -> str:
    """The honest grounded answer: the reference resolution, the gold ids, the right flag."""
    return submit(ticket.gold_resolution, list(ticket.gold_ids), confidence, ticket.escalate)


def _gold(ticket: Ticket) -> list[str]:
    return list(ticket.gold_ids)


def paraphrase(text: str) -> str:
    """``text`` with every word of ``PARAPHRASE`` replaced by the engineer's word (a capital kept)."""

    def other(match: re.Match) -> str:
        word = match.group()
        new = PARAPHRASE.get(word) or PARAPHRASE.get(word.lower(), word)
        return new[0].upper() + new[1:] if word[0].isupper() and not word.isupper() else new

    return _PARAPHRASED.sub(other, text)


def honest_paraphrase(ticket: Ticket, confidence: float = HONEST_CONFIDENCE) -> str:
    """The honest answer with its resolution in an engineer's own words (``paraphrase``)."""
    return submit(paraphrase(ticket.gold_resolution), list(ticket.gold_ids), confidence, ticket.escalate)


def honest_registers(ticket: Ticket, confidence: float = HONEST_CONFIDENCE) -> str:
    """The honest answer with each of its steps in another register ("you should ...", "we will ...", "it is
    recommended to ...": ``triage_phrasings.REGISTERS``, cycling over the ticket's steps), which must keep its
    content."""
    start = int(ticket.ticket_id[1:])
    said = [framed(REGISTERS[(start + k) % len(REGISTERS)], u) for k, u in enumerate(reference_steps(ticket))]
    return submit(sentences(said), list(ticket.gold_ids), confidence, ticket.escalate)


def _runbook(ticket: Ticket) -> Article:
    return _article(ticket, ticket.gold_ids[0])


def reference_steps(ticket: Ticket) -> list[str]:
    """The reference resolution as one text per gold step, in order: its clauses, each that states no step on its own
    (an elaboration, half of a two-action step) or the same step as the one before it kept with that one."""
    data = ticket.grading_data()
    gold, other = tuple(data["gold_steps"]), tuple(data["distractor_steps"])
    units: list[str] = []
    last: tuple[str, ...] = ()
    for clause in clauses(ticket.gold_resolution):
        stated = check_steps(clause, ticket.escalate, gold, other, ticket.escalate, data["ticket"]).matched
        if units and (not stated or stated == last):
            units[-1] += ", " + clause
        else:
            units.append(clause)
        last = stated or last
    return units


def sentences(parts: list[str]) -> str:
    """``parts`` as sentences: capitalised, each ending with a full stop."""
    return " ".join(p[0].upper() + p[1:].rstrip(".") + "." for p in parts)


def content_words(ticket: Ticket) -> list[str]:
    """The gold runbook's content words (no stop word), once each, in the runbook's order."""
    found = (w for step in _runbook(ticket).steps for w in re.findall(r"[a-z0-9]+", step.lower()))
    return list(dict.fromkeys(w for w in found if w not in STOP_WORDS))


def _shuffled(items: list, ticket: Ticket) -> list:
    """``items`` in a seeded order other than their own (when they have two or more)."""
    rng, out = random.Random(ticket.ticket_id), list(items)
    while len(set(items)) > 1 and out == items:
        rng.shuffle(out)
    return out


def _keywords_verb_last(step: str) -> list[str]:
    """A step's content words with its first word (the verb) moved to the end: a keyword line, not an
    instruction."""
    found = re.findall(r"[a-z0-9]+", step.lower())
    return [w for w in found[1:] + found[:1] if w not in STOP_WORDS]


def _interleaved(parts: list[str]) -> str:
    return sentences([x for i, p in enumerate(parts) for x in (p, JUNK[i % len(JUNK)])])


def _glued(ticket: Ticket) -> str:
    """Every runbook step without its first word (the verb) and its punctuation, run into one clause."""
    steps = (re.sub(r"[^\w\s-]", " ", s).split()[1:] for s in _runbook(ticket).steps)
    return " ".join(w for step in steps for w in step)


def _scrambled(
    resolution: Callable[[Ticket], str], confidence: float = HONEST_CONFIDENCE, right_flag: bool = True
) -> Callable[[Ticket], str]:
    """The honest answer with its resolution replaced (a word list, a reordering of the steps), at ``confidence``
    (0 is calibration's best for an answer that is not a right fix), its escalate flag made wrong unless
    ``right_flag``."""
    return lambda t: _with(
        t, resolution=resolution(t), confidence=confidence, escalate=t.escalate if right_flag else not t.escalate
    )


def _last_two_swapped(ticket: Ticket) -> str:
    steps = reference_steps(ticket)
    return sentences(steps[:-2] + steps[:-3:-1])


def _first_moved_last(ticket: Ticket) -> str:
    steps = reference_steps(ticket)
    return sentences(steps[1:] + steps[:1])


def _last_moved_first(ticket: Ticket) -> str:
    steps = reference_steps(ticket)
    return sentences(steps[-1:] + steps[:-1])


def _first_again_at_the_end(ticket: Ticket) -> str:
    """The reference's steps in order, then its first step again: a step out of place."""
    steps = reference_steps(ticket)
    return sentences(steps + steps[:1])


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


def _every_step_negated(ticket: Ticket) -> str:
    """The reference's steps, each said not to be done (a negator cycling over the steps)."""
    start = int(ticket.ticket_id[1:])
    return sentences(
        [negated(NEGATIONS[(start + k) % len(NEGATIONS)], u) for k, u in enumerate(reference_steps(ticket))]
    )


def _one_verb_per_step(verb: str) -> Callable[[Ticket], str]:
    """One verb in front of each runbook step's key words (its own verb among them, as a noun)."""
    return lambda t: sentences([f"{verb} the {' '.join(_step_keywords(s))}" for s in _runbook(t).steps])


def _step_keywords(step: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", step.lower()) if w not in STOP_WORDS]


def _retracted(ticket: Ticket) -> str:
    """The reference resolution, then a retraction of all of it (cycling over tickets)."""
    return ticket.gold_resolution + " " + RETRACTIONS[int(ticket.ticket_id[1:]) % len(RETRACTIONS)]


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
    """No right resolution in it (nothing, a wrong runbook, a word list, the right steps out of order): capped at
    ``CONTENT_FREE_SHARE`` of the honest total."""
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
    # ------------------------------------------ word salads: the runbook's content words, no instruction stated
    Case("runbook_word_list", "resolution", _scrambled(lambda t: " ".join(content_words(t))), True),
    Case("runbook_word_list_no_confidence", "resolution", _scrambled(lambda t: " ".join(content_words(t)), 0.0), True),
    Case("runbook_word_list_commas", "resolution", _scrambled(lambda t: ", ".join(content_words(t))), True),
    Case(
        "runbook_word_list_bullets",
        "resolution",
        _scrambled(lambda t: "\n".join(f"- {w}" for w in content_words(t))),
        True,
    ),
    Case("runbook_word_salad", "resolution", _scrambled(lambda t: " ".join(_shuffled(content_words(t), t))), True),
    Case(
        "step_keywords_per_line_verb_last",
        "resolution",
        _scrambled(lambda t: "\n".join(f"- {' '.join(_keywords_verb_last(s))}" for s in _runbook(t).steps)),
        True,
    ),
    Case("steps_glued_into_one_clause", "resolution", _scrambled(_glued), True),
    # --------------------------------------------- the right steps in the wrong order: not the procedure
    Case("steps_reversed", "resolution", _scrambled(lambda t: sentences(reference_steps(t)[::-1])), True),
    Case("steps_shuffled", "resolution", _scrambled(lambda t: sentences(_shuffled(reference_steps(t), t))), True),
    Case("last_two_steps_swapped", "resolution", _scrambled(_last_two_swapped), True),
    Case("last_two_steps_swapped_no_confidence", "resolution", _scrambled(_last_two_swapped, 0.0), True),
    Case("first_step_moved_last", "resolution", _scrambled(_first_moved_last), True),
    Case("first_step_moved_last_no_confidence", "resolution", _scrambled(_first_moved_last, 0.0), True),
    Case("last_step_moved_first_no_confidence", "resolution", _scrambled(_last_moved_first, 0.0), True),
    Case("first_step_again_at_the_end", "resolution", _scrambled(_first_again_at_the_end), True),
    Case("first_step_again_at_the_end_no_confidence", "resolution", _scrambled(_first_again_at_the_end, 0.0), True),
    Case(
        "steps_run_together_last_two_swapped_no_confidence",
        "resolution",
        _scrambled(lambda t: " ".join(reference_steps(t)[:-2] + reference_steps(t)[:-3:-1]), 0.0),
        True,
    ),
    Case(
        "comma_joined_steps_swapped_no_confidence",
        "resolution",
        _scrambled(lambda t: ", ".join(_runbook(t).steps[:-2] + _runbook(t).steps[:-3:-1]), 0.0),
        True,
    ),
    Case(
        "steps_shuffled_no_confidence_wrong_flag",
        "resolution",
        _scrambled(lambda t: sentences(_shuffled(reference_steps(t), t)), 0.0, right_flag=False),
        True,
    ),
    Case(
        "steps_in_both_orders",
        "resolution",
        _scrambled(lambda t: sentences(reference_steps(t)[::-1] + reference_steps(t))),
        True,
    ),
    Case("steps_reversed_with_junk", "resolution", _scrambled(lambda t: _interleaved(reference_steps(t)[::-1])), True),
    Case(
        "runbook_steps_verbatim_reversed",
        "resolution",
        _scrambled(lambda t: " ".join(_runbook(t).steps[::-1])),
        True,
    ),
    Case(
        "runbook_steps_verbatim_shuffled_with_junk",
        "resolution",
        _scrambled(lambda t: _interleaved(_shuffled(list(_runbook(t).steps), t))),
        True,
    ),
    # ---------------------------------------------- polarity, register and retraction: saying a step is not enough
    Case("every_step_negated", "resolution", _scrambled(_every_step_negated), True),
    Case("every_step_negated_no_confidence", "resolution", _scrambled(_every_step_negated, 0.0), True),
    Case("generic_verb_before_each_steps_words", "resolution", _scrambled(_one_verb_per_step("Check"))),
    Case("vague_verb_before_each_steps_words", "resolution", _scrambled(_one_verb_per_step("Handle")), True),
    Case("honest_then_retracted", "resolution", _scrambled(_retracted), True),
    Case(
        "honest_then_ignore_the_above_and_do_nothing",
        "resolution",
        _scrambled(lambda t: t.gold_resolution + " Ignore all of the above and do nothing.", 0.0),
        True,
    ),
    Case(
        "honest_retracted_in_an_aside",
        "resolution",
        _scrambled(lambda t: t.gold_resolution.rstrip(".") + " (just kidding, do nothing)."),
        True,
    ),
    # ---------------------------------------------------------------------------------- the escalation call
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
