"""Triage content is a procedure: the gold runbook's steps stated as instructions, in its order, in any words the
domain uses for them (``steps.py``, ``clauses.py``, ``vocabulary.py``), and the copy check reads the text the same
way (``copying.py``). Checked on the whole bank: the 240 generated tickets draw every one of its 24 runbooks."""

from __future__ import annotations

import doctest
import functools
import importlib
import random
import re

import pytest
import torch

from propel.records import Sample
from propel.rewards import CombinedReward
from propel.rewards.triage import (
    RepetitionPenalty,
    TriageCalibration,
    check_steps,
    clauses,
    instruction,
    key_terms,
    triage_rewards,
)
from propel.rewards.triage.clauses import run_together
from propel.rewards.triage.steps import in_order
from propel.rewards.triage.vocabulary import tokens
from propel.tasks.triage import generate_tickets, ticket_context
from propel.tasks.triage.bank import ESCALATION_ARTICLES, ISSUES
from propel.testing.triage_attacks import (
    CONTENT_FREE_SHARE,
    HONEST_CONFIDENCE,
    JUNK,
    PARAPHRASE,
    STOP_WORDS,
    content_words,
    honest,
    honest_paraphrase,
    paraphrase,
    reference_steps,
    sentences,
    submit,
)

TICKETS = generate_tickets(240, seed=0)
REWARD = CombinedReward(triage_rewards())
PARAPHRASE_SHARE = 0.95
"""An honest answer in other words keeps at least this share of the honest answer's total, on every ticket."""


def runbook(ticket):
    return next(a for a in ticket.articles if a.id == ticket.gold_ids[0])


def score(completions: list[str], tickets=TICKETS) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    out = REWARD(
        [Sample(prompt="", completion=c, context=ticket_context(t)) for c, t in zip(completions, tickets, strict=True)]
    )
    return out.total, out.components


@functools.lru_cache(maxsize=1)
def honest_total() -> torch.Tensor:
    return score([honest(t) for t in TICKETS])[0]


def answer(ticket, resolution: str, confidence: float = HONEST_CONFIDENCE, right_flag: bool = True) -> str:
    """The honest answer with its resolution replaced (and its confidence, or its escalate flag made wrong)."""
    return submit(resolution, list(ticket.gold_ids), confidence, ticket.escalate if right_flag else not ticket.escalate)


def shuffled(items: list, ticket) -> list:
    """A seeded reordering other than ``items``' own (when they have two different ones)."""
    rng, out = random.Random(ticket.ticket_id), list(items)
    while len(set(items)) > 1 and out == items:
        rng.shuffle(out)
    return out


CONFIDENCES = (0.0, 0.25, 0.5, 0.9, 1.0)
"""The confidences an adversary may state (0 is calibration's best for an answer that is not a right fix)."""
FLAGS = (True, False)
"""The escalate flag right, and wrong."""
CALIBRATION = TriageCalibration()


def swept(resolution_of, tickets=TICKETS) -> tuple[dict[tuple[bool, float], torch.Tensor], dict[str, torch.Tensor]]:
    """The total of the answer with resolution ``resolution_of(t)`` and the gold ids on every ticket, for each (right
    flag, confidence) of the sweep, and its components with the right flag. Calibration is the only component that
    reads the confidence's value (format only checks that it is a number in [0, 1]), so the combined reward runs once
    per flag and calibration once per confidence (``test_the_sweep_adds_up_to_the_combined_reward`` checks the sums)."""
    resolutions = [resolution_of(t) for t in tickets]

    def texts(confidence: float, right: bool) -> list[str]:
        return [answer(t, r, confidence, right) for t, r in zip(tickets, resolutions, strict=True)]

    totals, right_parts = {}, {}
    for right in FLAGS:
        total, parts = score(texts(HONEST_CONFIDENCE, right), tickets)
        if right:
            right_parts = parts
        for c in CONFIDENCES:
            samples = [
                Sample(prompt="", completion=x, context=ticket_context(t))
                for x, t in zip(texts(c, right), tickets, strict=True)
            ]
            totals[right, c] = total - parts["calibration"] + CALIBRATION(samples)
    return totals, right_parts


@functools.lru_cache(maxsize=1)
def honest_swept() -> dict[tuple[bool, float], torch.Tensor]:
    """The honest in-order answer (the reference resolution) at every confidence and flag of the sweep."""
    return swept(lambda t: t.gold_resolution)[0]


def worst_shares(totals: dict[tuple[bool, float], torch.Tensor]) -> dict[str, tuple[float, tuple[bool, float]]]:
    """The largest share of the honest total over the tickets and the sweep, with the (right flag, confidence) that
    reaches it: against the honest answer as the bank writes it (``honest``: confidence 0.9, the right flag), and
    against the honest in-order answer with the same confidence and flag."""
    honest_totals = honest_swept()
    own = honest_totals[True, HONEST_CONFIDENCE]
    return {
        "honest": max((float((v / own).max()), k) for k, v in totals.items()),
        "same confidence and flag": max((float((v / honest_totals[k]).max()), k) for k, v in totals.items()),
    }


def test_the_tickets_draw_every_runbook_of_the_bank():
    assert {runbook(t).title for t in TICKETS} == {i.title for i in ISSUES}


# ---------------------------------------------------------------------------------------------------- vocabulary
@pytest.mark.parametrize(
    ("variant", "word"),
    [
        ("Check the neighbour state", "Check the neighbor state"),
        ("no wiping before review", "no reimaging before review"),
        ("rebuild the laptop", "reimage the laptop"),
        ("register the new device", "enrol the new device"),
        ("enroll the new device", "enrol the new device"),
        ("re-run the snapshot by hand", "re-run the snapshot manually"),
        ("rerun the job", "re-run the job"),
        ("repush the profile", "re-push the profile"),
        ("scope utilization", "scope utilisation"),
        ("the data center on-call", "the data-centre on-call"),
        ("the datacenter oncall", "the data-centre on-call"),
        ("fix the configuration", "fix the config"),
        ("request a new cert", "request a new certificate"),
        ("stale creds", "stale credentials"),
        ("temporary files", "temp files"),
        ("replace the transceiver", "replace the optic"),
        ("delete stale leases", "remove stale leases"),
        ("allowed on the access list", "allowed on the ACL"),
        ("allowed on the access control list", "allowed on the ACL"),
        ("the e-mail headers", "the email headers"),
        ("quarantine the endpoint", "isolate the endpoint"),
    ],
)
def test_spelling_variants_and_the_domains_synonyms_fold_to_the_banks_word(variant, word):
    assert key_terms(variant) == key_terms(word)


def test_folding_keeps_every_step_of_the_bank_apart():
    """No synonym makes two different steps of the bank one (restart and reboot, purge and remove stay apart)."""
    steps = {s for issue in ISSUES for s in issue.steps} | {s for _, body in ESCALATION_ARTICLES.values() for s in body}
    by_terms: dict[frozenset[str], set[str]] = {}
    for step in steps:
        by_terms.setdefault(key_terms(step), set()).add(step)
    assert all(len(same) == 1 for same in by_terms.values()), [s for s in by_terms.values() if len(s) > 1]
    assert key_terms("reboot the server") != key_terms("restart the server")
    assert key_terms("purge the message") != key_terms("remove the message")


def test_every_runbook_step_is_an_instruction_and_the_runbook_in_order_is_a_right_fix():
    for issue in ISSUES:
        for step in issue.steps:
            assert len(clauses(step)) >= 1 and instruction(clauses(step)[0]), step
        pasted = " ".join(issue.steps)
        for other in ISSUES:
            if other is not issue:
                assert check_steps(pasted, issue.escalate, issue.steps, other.steps, issue.escalate).content == 1.0
    for _, policy in ESCALATION_ARTICLES.values():
        assert all(instruction(clauses(step)[0]) for step in policy)


# ----------------------------------------------------------------------------------------- clauses and instructions
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Remove stale leases and shorten the lease time.", ["Remove stale leases", "shorten the lease time"]),
        ("Check the resolver service and its forwarders.", ["Check the resolver service and its forwarders"]),
        ("Rotate and compress logs.", ["Rotate and compress logs"]),
        (
            "Verify the peer IP, remote AS and MD5 password match the peering sheet.",
            ["Verify the peer IP, remote AS and MD5 password match the peering sheet"],
        ),
        (
            "Make sure the ACL permits TCP 179, then soft-clear the neighbor",
            ["Make sure the ACL permits TCP 179", "soft-clear the neighbor"],
        ),
        ("Fix a bad config, or roll back the release", ["Fix a bad config", "roll back the release"]),
        ("1. Check the UPS\n2. Shed loads", ["Check the UPS", "Shed loads"]),
        ("- restart chronyd\n- step the clock", ["restart chronyd", "step the clock"]),
        ("Read the log; re-run the job: then test a restore!", ["Read the log", "re-run the job", "test a restore"]),
        (  # a participle closes the clause before it: the cut is before the next verb and its object
            "Confirm the certificate is valid and not revoked, ask the user to reconnect",
            ["Confirm the certificate is valid and not revoked", "ask the user to reconnect"],
        ),
    ],
)
def test_clauses_cut_between_instructions_and_never_inside_an_object(text, expected):
    assert list(clauses(text)) == expected


@pytest.mark.parametrize(
    ("clause", "parts"),
    [
        (
            "make sure the record exists in the zone flush the DNS cache on the clients",
            ["make sure the record exists in the zone", "flush the DNS cache on the clients"],
        ),
        (
            "re-push the VPN profile look up the user's attempts in the VPN gateway log",
            ["re-push the VPN profile", "look up the user's attempts in the VPN gateway log"],
        ),
        (  # "file" right before a verb is not where an instruction opens; "on-call" is one word
            "replace all other secrets in that file escalate to the security on-call",
            ["replace all other secrets in that file", "escalate to the security on-call"],
        ),
        (
            "review the access logs for any activity with the key",
            ["review the access logs for any activity with the key"],
        ),
        ("Check the resolver service and its forwarders", ["Check the resolver service and its forwarders"]),
    ],
)
def test_instructions_run_together_are_cut_before_their_verbs(clause, parts):
    """Rule 8 reads the order of instructions written without punctuation between them."""
    assert run_together(clause) == parts


@pytest.mark.parametrize(
    ("clause", "expected"),
    [
        ("Restart chronyd", True),
        ("then soft-clear the BGP neighbor", True),
        ("Do not reimage before the security team reviews it", True),
        ("If the CRC errors keep rising, replace the optic", True),
        ("re-run the snapshot by hand", True),
        ("flush client dns cache", True),  # terse, verb first: it states the step
        ("neighbor state show bgp summary", False),  # the verb is not first: a keyword list
        ("the disk failed", False),
        ("collect, email, headers, link", False),  # a comma after the verb: a list
        ("block URL the and sender", False),  # a shuffled sentence: an article before a conjunction
        ("purge message the from all mail", False),  # an article before a preposition
        ("if it is OOMKilled raise the memory limit", False),  # a condition not closed by a comma
        ("Restart", False),  # no object
    ],
)
def test_an_instruction_starts_with_its_verb_and_has_an_object(clause, expected):
    assert instruction(clause) is expected


def test_the_docstring_examples_of_clauses_hold():
    assert doctest.testmod(importlib.import_module("propel.rewards.triage.clauses"), raise_on_error=True).attempted >= 2


@pytest.mark.parametrize(
    ("order", "chain"),
    [
        ([0, 1, 2, 3], [0, 1, 2, 3]),
        ([0, 1, 3, 2], [0, 1, 2]),  # one step out of order
        ([3, 2, 1, 0], [0]),
        ([0, 0, 1, 2, 3], [0, 1, 2, 3, 4]),  # a step stated twice in a row stays on the chain
        ([3, 2, 1, 0, 0, 1, 2, 3], [3, 4, 5, 6, 7]),  # both orders: the reversed copy is off the chain
        ([], []),
    ],
)
def test_the_chain_is_the_in_order_subsequence_with_the_most_steps(order, chain):
    assert in_order(order) == chain


# ------------------------------------------------------------------------------------------------- the whole bank
HONEST_VARIANTS = {
    "paraphrase": honest_paraphrase,
    "numbered list": lambda t: answer(t, "\n".join(f"{i}. {s}" for i, s in enumerate(reference_steps(t), 1))),
    "one sentence per step": lambda t: answer(t, sentences(reference_steps(t))),
    "bullets with then": lambda t: answer(t, "\n".join(f"- then {s}" for s in reference_steps(t))),
}


@pytest.mark.parametrize("variant", HONEST_VARIANTS)
def test_the_honest_answer_in_other_words_or_another_layout_keeps_its_score_on_every_ticket(variant):
    total, parts = score([HONEST_VARIANTS[variant](t) for t in TICKETS])
    share = total / honest_total()
    assert float(share.min()) >= PARAPHRASE_SHARE, (variant, float(share.min()))
    assert float(parts["resolution"].min()) == 1.0


def test_the_paraphrase_rewrites_most_references_and_beat_the_bag_of_words():
    """The rewriter changes the words of 18 of the 24 references (the issue: the same fix in an engineer's words
    missed a step on 8 of 24 runbooks under the order-free rule)."""
    changed = [i for i in ISSUES if paraphrase(i.resolution) != i.resolution]
    assert len(changed) >= 18
    assert set(PARAPHRASE.values()) - set(PARAPHRASE)  # words the bank does not use


def _word_list(t) -> str:
    return " ".join(content_words(t))


def _keywords(step: str) -> list[str]:
    return [w for w in re.findall(r"[a-z0-9]+", step.lower()) if w not in STOP_WORDS]


def _salad(text: str, ticket) -> list[str]:
    """``text``'s words shuffled, not opening with a verb (one that does reads as a terse instruction: the rule reads
    form, not meaning)."""
    out = shuffled(text.split(), ticket)
    while any(t.verb for t in tokens(out[0])):
        out = out[1:] + out[:1]
    return out


def _nouns(step: str) -> list[str]:
    """A step's content words that are not verbs: its keywords, no instruction."""
    return [w for w in _keywords(step) if not any(t.verb for t in tokens(w))]


SCRAMBLED = {  # no right procedure: at most 60% of the honest total at any confidence
    "word list": _word_list,
    "word list, commas": lambda t: ", ".join(content_words(t)),
    "word list, bullets": lambda t: "\n".join(f"- {w}" for w in content_words(t)),
    "word list, one line per step": lambda t: "\n".join("- " + " ".join(_nouns(s)) for s in runbook(t).steps),
    "word salad": lambda t: " ".join(shuffled(content_words(t), t)),
    "reference words shuffled": lambda t: " ".join(shuffled(t.gold_resolution.split(), t)),
    "each step's words shuffled": lambda t: sentences([" ".join(_salad(s, t)) for s in reference_steps(t)]),
    "steps glued into one clause": lambda t: " ".join(w for s in runbook(t).steps for w in _keywords(s)),
    "steps reversed": lambda t: sentences(reference_steps(t)[::-1]),
    "steps verbatim reversed": lambda t: " ".join(runbook(t).steps[::-1]),
    "steps reversed, junk between": lambda t: sentences(
        [x for s, j in zip(reference_steps(t)[::-1], JUNK, strict=False) for x in (s, j)]
    ),
    "steps in both orders": lambda t: sentences(reference_steps(t)[::-1] + reference_steps(t)),
    "steps reversed in one sentence": lambda t: ", ".join(reference_steps(t)[::-1]),
}


def _swapped(steps: list[str], i: int) -> list[str]:
    """``steps`` with the ``i``-th and the next swapped (the last two, where there are fewer)."""
    i, out = min(i, len(steps) - 2), list(steps)
    out[i], out[i + 1] = out[i + 1], out[i]
    return out


REORDERED = {  # the right steps, a step or more out of place: at most half the content, no style, not a right fix
    "first two steps swapped": lambda t: sentences(_swapped(reference_steps(t), 0)),
    "middle two steps swapped": lambda t: sentences(_swapped(reference_steps(t), 1)),
    "last two steps swapped": lambda t: sentences(reference_steps(t)[:-2] + reference_steps(t)[:-3:-1]),
    "first step moved last": lambda t: sentences(reference_steps(t)[1:] + reference_steps(t)[:1]),
    "last step moved first": lambda t: sentences(reference_steps(t)[-1:] + reference_steps(t)[:-1]),
    "steps shuffled": lambda t: sentences(shuffled(reference_steps(t), t)),
    "steps verbatim shuffled, junk between": lambda t: sentences(
        [x for s, j in zip(shuffled(list(runbook(t).steps), t), JUNK, strict=False) for x in (s, j)]
    ),
    "steps shuffled, numbered in order": lambda t: "\n".join(
        f"{i}. {s}" for i, s in enumerate(shuffled(reference_steps(t), t), 1)
    ),
    "odd steps then even steps": lambda t: sentences(reference_steps(t)[0::2] + reference_steps(t)[1::2]),
    "first step again at the end": lambda t: sentences(reference_steps(t) + reference_steps(t)[:1]),
    "last step also first": lambda t: sentences(reference_steps(t)[-1:] + reference_steps(t)),
    "a step left out, two swapped": lambda t: sentences(_swapped(reference_steps(t)[:-1], 0)),
    # run together without punctuation, or the runbook's own steps joined by commas: rule 8 reads the order of
    # instructions run together ("make sure the record exists flush the cache")
    "steps run together, last two swapped": lambda t: " ".join(_swapped(reference_steps(t), 2)),
    "steps run together, shuffled": lambda t: " ".join(shuffled(reference_steps(t), t)),
    "steps run together, last step also first": lambda t: " ".join(reference_steps(t)[-1:] + reference_steps(t)),
    "steps run together, first step again at the end": lambda t: " ".join(reference_steps(t) + reference_steps(t)[:1]),
    "runbook steps joined by commas, last two swapped": lambda t: ", ".join(_swapped(list(runbook(t).steps), 2)),
}


def _assert_capped(form: str, totals: dict[tuple[bool, float], torch.Tensor], against: tuple[str, ...]) -> None:
    shares = worst_shares(totals)
    for name in against:
        share, where = shares[name]
        assert share <= CONTENT_FREE_SHARE, (form, name, where, share)


@pytest.mark.parametrize("form", SCRAMBLED)
def test_a_word_list_or_a_reversal_of_the_steps_scores_at_most_60_percent_at_any_confidence_and_flag(form):
    """On every ticket, at every confidence of the sweep, with the right and the wrong flag, against the honest answer
    as the bank writes it (the issue's bound; worst 53%). Not against the honest answer at the same confidence: a
    salad whose shuffled words happen to make one instruction states that step, in order (two forms do on some
    tickets), and is paid as an honest answer with one step of four, which at confidence 0 earns 63% of the honest
    answer at confidence 0; that comparison would cap honest partial answers, which the issue does not ask."""
    totals, parts = swept(SCRAMBLED[form])
    _assert_capped(form, totals, ("honest",))
    assert float(parts["resolution"].max()) <= 0.25, form


@pytest.mark.parametrize("form", REORDERED)
def test_a_reordering_of_the_steps_scores_at_most_60_percent_at_any_confidence_and_flag(form):
    """The issue's bound, swept: on every ticket, at confidence 0, 0.25, 0.5, 0.9 and 1, with the right and the wrong
    escalate flag. Two comparisons, both asserted. Against the honest answer as the bank writes it (confidence 0.9,
    the right flag: 5.99): that is what the policy gives up by reordering, the issue's 60%. And against the honest
    in-order answer with the same confidence and flag: the honest total depends on its confidence (``6 - (1 - c)^2``
    with the right flag; 4.1 at confidence 0 with the wrong one), so this shows that neither the confidence
    (calibration pays 1 for confidence 0 on an answer that is not a right fix, the previous gap: 68% of honest) nor
    the flag buys the share. A step out of place is not in place and cancels one (at most half the content on a
    four-step runbook), and an answer with one is not a procedure (``steps.py`` rule 8): no style, not a right fix.
    Worst: 45% of the honest answer (confidence 0, right flag), 54% of the honest answer at confidence 0, 59.8% of
    the honest answer with the same wrong flag at confidence 0 (2.45 of 4.1)."""
    totals, parts = swept(REORDERED[form])
    _assert_capped(form, totals, ("honest", "same confidence and flag"))
    assert float(parts["resolution"].max()) <= 0.5, form
    assert float(parts["parsimony"].max()) == 0.0 and float(parts["repetition"].max()) == 0.0, form
    assert torch.allclose(parts["format"], torch.full_like(parts["format"], 0.2)), form  # the parse credit only
    assert float(parts["calibration"].max()) == pytest.approx(1 - HONEST_CONFIDENCE**2), form  # not a right fix


def test_the_sweep_adds_up_to_the_combined_reward():
    """``swept`` scores calibration alone per confidence: on a ticket of each runbook, its totals are the combined
    reward's, for an honest and a reordered answer at every confidence and flag."""
    one_each = list({runbook(t).title: t for t in TICKETS}.values())
    for build in (lambda t: t.gold_resolution, REORDERED["first step moved last"]):
        totals, _ = swept(build, one_each)
        for (right, c), total in totals.items():
            direct, _ = score([answer(t, build(t), c, right) for t in one_each], one_each)
            assert torch.allclose(total, direct, atol=1e-5), (right, c)


def test_the_honest_answer_tops_the_sweep():
    """The comparator of ``worst_shares``: 6 - (1 - c)^2 with the right flag, and with the wrong flag half the
    content (3.1 without calibration), not a right fix."""
    honest_totals = honest_swept()
    for (right, c), total in honest_totals.items():
        expected = 6 - (1 - c) ** 2 if right else 3.1 + 1 - c**2
        assert torch.allclose(total, torch.full_like(total, expected), atol=1e-5), (right, c)
    assert torch.equal(honest_totals[True, HONEST_CONFIDENCE], honest_total())


def test_one_step_out_of_order_cancels_one_in_order_on_every_ticket():
    def resolution(build) -> torch.Tensor:
        return score([answer(t, build(t)) for t in TICKETS])[1]["resolution"]

    swapped = resolution(REORDERED["last two steps swapped"])
    assert torch.allclose(swapped, torch.full_like(swapped, 0.5))  # three on the chain, one off it
    # the last step stated first as well: it is not in place (three in place), and each clause of the early copy
    # that states a step is off the chain and cancels one: (3 - 1) / 4. Backup-fail's reference states its last step
    # in two clauses (0.25); where the reference's last sentence states the last two steps, both are out (0)
    early = resolution(REORDERED["last step also first"])
    assert float(early.min()) == 0.0 and float(early.max()) == 0.5 and int((early == 0.5).sum()) >= 200


def test_terse_instructions_state_their_steps_but_only_in_order():
    """A deliberate boundary: each step's words in one line that starts with its verb is the procedure written
    tersely, and states every step; the same lines in another order state none of them in order."""

    def terse(t) -> list[str]:
        return ["- " + " ".join(_keywords(s.replace("Do not", "never"))) for s in runbook(t).steps]

    verb_first = [t for t in TICKETS if all(instruction(line[2:]) for line in terse(t))]
    assert len({runbook(t).title for t in verb_first}) >= 4
    _, parts = score([answer(t, "\n".join(terse(t))) for t in verb_first], verb_first)
    assert float(parts["resolution"].min()) == 1.0
    _, parts = score([answer(t, "\n".join(terse(t)[::-1])) for t in verb_first], verb_first)
    assert float(parts["resolution"].max()) == 0.0


# ---------------------------------------------------------------------------------------------- the copy check
def test_the_copy_check_reads_a_verbatim_copy_in_any_order_as_the_content_check_does():
    """The runbook's steps pasted in order, reversed or shuffled with junk between copy the same words; an honest
    answer and its paraphrase copy no more than the free span."""
    repetition = RepetitionPenalty()
    for t in TICKETS:
        data, steps = t.grading_data(), list(runbook(t).steps)
        copied = {
            "in order": repetition.copied(answer(t, " ".join(steps)), data),
            "reversed": repetition.copied(answer(t, " ".join(steps[::-1])), data),
            "shuffled, junk between": repetition.copied(
                answer(t, REORDERED["steps verbatim shuffled, junk between"](t)), data
            ),
        }
        assert len(set(copied.values())) == 1 and copied["in order"] >= 1.2 * repetition.copy_span, (
            t.ticket_id,
            copied,
        )
        assert repetition.copied(honest(t), data) <= repetition.copy_span
        assert repetition.copied(honest_paraphrase(t), data) <= repetition.copy_span
