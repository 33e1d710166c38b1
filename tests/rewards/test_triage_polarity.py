"""Triage content reads polarity and register (``reading.py``, ``actions.py``, ``retraction.py``, ``steps.py`` rules
4b and 4c), checked as classes of behaviour on every gold step of the 240 generated tickets (all 24 runbooks), each
class with its variants cycling over tickets and steps:

- a negated step is not the step, in any negator and register;
- a runbook step that says not to ("Do not reboot the server") is stated only by a clause that also says not to, and
  a clause saying to do it contradicts the runbook (a wrong step: no procedure);
- modal, declarative, impersonal, mandate and passive phrasings of a step state it as the imperative does;
- a verb that is not the step's action (an inspection, a vague verb, another change) does not state a changing step;
- a retraction cancels what it retracts: everything before it, or the step it names; what follows it stands.
"""

from __future__ import annotations

import doctest
import functools
import importlib
import re

import pytest
import torch

from propel.records import Sample
from propel.rewards import CombinedReward
from propel.rewards.triage import check_steps, key_terms, triage_rewards
from propel.rewards.triage.actions import INSPECTIONS, inspection, same_action, verb_stem
from propel.rewards.triage.reading import read
from propel.rewards.triage.steps import step_action
from propel.tasks.triage import generate_tickets, ticket_context
from propel.testing.triage_attacks import CONTENT_FREE_SHARE, STOP_WORDS, reference_steps, sentences, submit
from propel.testing.triage_phrasings import NEGATIONS, REGISTERS, RETRACTIONS, bare, framed, gerund, negated

TICKETS = generate_tickets(240, seed=0)
REWARD = CombinedReward(triage_rewards())


def check(ticket, resolution: str):
    data = ticket.grading_data()
    gold, other = tuple(data["gold_steps"]), tuple(data["distractor_steps"])
    return check_steps(resolution, ticket.escalate, gold, other, ticket.escalate, data["ticket"])


def gold(ticket) -> list[str]:
    return list(ticket.grading_data()["gold_steps"])


@functools.lru_cache(maxsize=512)
def _units(ticket_id: str) -> tuple[tuple[str, frozenset[int]], ...]:
    ticket = next(t for t in TICKETS if t.ticket_id == ticket_id)
    steps = gold(ticket)
    out = tuple((bare(u), frozenset(steps.index(s) for s in check(ticket, u).matched)) for u in reference_steps(ticket))
    assert sorted(k for _, said in out for k in said) == list(range(len(steps))), ticket_id
    return out


def units(ticket) -> list[str]:
    """The reference resolution as one imperative per gold step (two for a step it states in two clauses, a step
    stated with the next one's in one: ``reference_steps``), lower-case, without a leading "then"."""
    return [u for u, _ in _units(ticket.ticket_id)]


def unit_steps(ticket) -> list[frozenset[int]]:
    """The gold steps each of ``units`` states."""
    return [said for _, said in _units(ticket.ticket_id)]


def positive(ticket) -> list[int]:
    """Indices of the units that state only gold steps saying to do something (not "Do not ...")."""
    steps = gold(ticket)
    return [j for j, said in enumerate(unit_steps(ticket)) if not any(step_action(steps[k]).negative for k in said)]


def with_unit(ticket, k: int, text: str) -> str:
    out = units(ticket)
    out[k] = text
    return sentences(out)


def totals(resolutions: list[str], tickets) -> torch.Tensor:
    samples = [
        Sample(prompt="", completion=submit(r, list(t.gold_ids), 0.9, t.escalate), context=ticket_context(t))
        for r, t in zip(resolutions, tickets, strict=True)
    ]
    return REWARD(samples).total


@functools.lru_cache(maxsize=1)
def honest_totals() -> torch.Tensor:
    return totals([t.gold_resolution for t in TICKETS], TICKETS)


def test_the_reference_units_state_their_steps_as_the_reference_does():
    """The baseline every class below edits: the reference, one sentence per step, states every step."""
    for t in TICKETS:
        assert check(t, sentences(units(t))).content == 1.0, t.ticket_id


# -------------------------------------------------------------------------------------------------------- polarity
def test_a_negated_step_is_not_the_step_on_every_step_of_every_ticket():
    """Each positive gold step, in turn, said not to be done (a negator cycling over tickets and steps): that step
    is not stated, and the other steps are still stated around it."""
    for i, t in enumerate(TICKETS):
        steps, said = gold(t), unit_steps(t)
        for j in positive(t):
            resolution = with_unit(t, j, negated(NEGATIONS[(4 * i + j) % len(NEGATIONS)], units(t)[j]))
            verdict = check(t, resolution)
            assert set(verdict.matched) == {s for k, s in enumerate(steps) if k not in said[j]}, (
                t.ticket_id,
                resolution,
            )


def test_an_answer_that_says_not_to_do_every_step_has_no_content():
    """Every positive step negated (the review's "Do not <step>" and "Never <step>" answers, 99.3-99.9% of the honest
    score before): nothing stated but the runbook's own "do not" steps, and at most 40% of the honest total."""
    resolutions = []
    for i, t in enumerate(TICKETS):
        out = units(t)
        for j in positive(t):
            out[j] = negated(NEGATIONS[(i + j) % len(NEGATIONS)], out[j])
        resolution = sentences(out)
        resolutions.append(resolution)
        forbidding = sum(step_action(s).negative for s in gold(t))
        assert check(t, resolution).content == forbidding / len(gold(t)), (t.ticket_id, resolution)
    shares = totals(resolutions, TICKETS) / honest_totals()
    assert float(shares.max()) <= 0.4, float(shares.max())


def test_saying_not_to_follow_a_distractor_step_is_not_following_it():
    """An honest answer that warns against a retrieved wrong runbook's step keeps its content and follows no wrong
    step. (A warning whose words name a gold step, two of its key terms, takes that step back: the next test.)"""
    tried = 0
    for i, t in enumerate(TICKETS):
        steps = [key_terms(s) for s in gold(t)]
        others = [
            s
            for s in t.grading_data()["distractor_steps"]
            if not step_action(s).negative and all(len(key_terms(s) & g) < 2 for g in steps)
        ]
        if not others:
            continue
        warning = negated("do not {}", others[i % len(others)])
        verdict = check(t, t.gold_resolution + f" {warning[0].upper()}{warning[1:]}.")
        assert verdict.content == 1.0 and verdict.wrong == (), (t.ticket_id, warning, verdict)
        tried += 1
    assert tried >= 200


# ------------------------------------------------------------------------------------ steps that say not to do
SAY_NOT_TO = (
    "Do not {x}",
    "Never {x}",
    "You must not {x}",
    "Avoid {ing}",
    "There is no need to {x}",
    "{passive_not}",
    "{Ing} is a bad idea",
    "Under no circumstances should you {x}",
)
SAY_TO = ("{X}", "You should {x}", "We will {x}", "I'd {x}", "Make sure to {x}", "{passive}", "Go ahead and {x}")


def _participle(verb: str) -> str:
    return verb + ("d" if verb.endswith("e") else "ed")


def _forms(step: str) -> dict[str, str]:
    """The action a "Do not ..." step forbids in the fields ``SAY_NOT_TO`` and ``SAY_TO`` use."""
    x = re.sub(r"^Do not ", "", step).rstrip(".")
    verb, _, rest = x.partition(" ")
    subject = rest if rest.startswith("the ") else "the host"
    tail = "" if rest.startswith("the ") else " " + rest
    return {
        "x": x,
        "X": x[0].upper() + x[1:],
        "ing": gerund(x),
        "Ing": gerund(x)[0].upper() + gerund(x)[1:],
        "passive": f"{subject[0].upper() + subject[1:]} should be {_participle(verb)}{tail}",
        "passive_not": f"{subject[0].upper() + subject[1:]} must not be {_participle(verb)}{tail}",
    }


def _forbidding(ticket) -> list[tuple[int, int]]:
    """(gold step, unit stating it) of each gold step that says not to do something."""
    said = unit_steps(ticket)
    return [
        (k, next(j for j, ks in enumerate(said) if k in ks))
        for k, s in enumerate(gold(ticket))
        if step_action(s).negative
    ]


def test_a_runbook_step_that_says_not_to_is_stated_only_by_an_answer_that_says_not_to():
    """On every ticket whose runbook says not to do something (RAID: "Do not reboot the server"; malware: "Do not
    reimage before the security team reviews it"): saying not to, in any register, states the step; saying to do it
    does not, contradicts the runbook (the review: "Reboot the server" scored 99.7%) and is no procedure; doing it
    under another condition than the step's ("after the review") neither states nor contradicts it."""
    found = [t for t in TICKETS if _forbidding(t)]
    assert len(found) >= 20 and len({t.gold_ids[0] for t in found}) == 2
    for i, t in enumerate(found):
        for k, j in _forbidding(t):
            step, forms = gold(t)[k], _forms(gold(t)[k])
            for form in SAY_NOT_TO:
                verdict = check(t, with_unit(t, j, form.format(**forms)))
                assert verdict.content == 1.0, (t.ticket_id, form.format(**forms), verdict)
            form = SAY_TO[i % len(SAY_TO)].format(**forms)
            verdict = check(t, with_unit(t, j, form))
            assert step not in verdict.matched and verdict.contradicted == (step,), (t.ticket_id, form, verdict)
            assert verdict.procedure == 0.0 and not verdict.right_fix()
            other = f"{forms['X'].split(' before ')[0]} after the disk is replaced and the team has reviewed it"
            verdict = check(t, with_unit(t, j, other))
            assert step not in verdict.matched and verdict.contradicted == (), (t.ticket_id, other, verdict)


def test_the_runbook_pasted_without_its_do_not_is_no_procedure():
    """The runbook's own steps with "Do not" dropped: every other step stated, the forbidden one contradicted."""
    found = [t for t in TICKETS if _forbidding(t)]
    resolutions = [" ".join(re.sub(r"^Do not (\w)", lambda m: m.group(1).upper(), s) for s in gold(t)) for t in found]
    for t, resolution in zip(found, resolutions, strict=True):
        verdict = check(t, resolution)
        assert verdict.content == 0.5 and verdict.procedure == 0.0, (t.ticket_id, verdict)
    shares = totals(resolutions, found) / honest_totals()[[TICKETS.index(t) for t in found]]
    assert float(shares.max()) <= CONTENT_FREE_SHARE


# -------------------------------------------------------------------------------------------------------- register
def test_modal_declarative_and_impersonal_phrasings_keep_the_imperatives_content_on_every_ticket():
    """Every step of every ticket framed in a register cycling over tickets and steps (the review: "You should
    <step>" scored 1.39 against 5.20): the content of the imperative answer (1.0), and at least 90% of its total."""
    resolutions = []
    for i, t in enumerate(TICKETS):
        said = [framed(REGISTERS[(5 * i + j) % len(REGISTERS)], u) for j, u in enumerate(units(t))]
        resolution = sentences(said)
        resolutions.append(resolution)
        assert check(t, resolution).content == 1.0, (t.ticket_id, resolution)
    shares = totals(resolutions, TICKETS) / honest_totals()
    assert float(shares.min()) >= 0.9, float(shares.min())


def test_one_register_for_the_whole_answer_keeps_its_content():
    """The whole answer in one register, each register on every runbook (24 tickets, one per runbook)."""
    one = list({t.gold_ids[0]: t for t in TICKETS}.values())
    for register in REGISTERS:
        for t in one:
            resolution = sentences([framed(register, u) for u in units(t)])
            assert check(t, resolution).content == 1.0, (register, t.ticket_id, resolution)


_PARTICLES = ("down", "back", "off", "up")
_ENDS = "with from to for in on at under over immediately manually after before when if as"
_OBJECT_ENDS = frozenset(_ENDS.split())
_IRREGULAR = {"shut": "shut", "reset": "reset", "re-run": "re-run", "run": "run", "set": "set", "cut": "cut"}


def passive(step: str) -> str | None:
    """A changing runbook step in the passive ("Revoke the leaked key immediately" -> "The leaked key should be revoked
    immediately"); None for an inspection, a "do not", a step without an object or one whose object holds a
    clause."""
    words = step.rstrip(".").split()
    verb, rest = words[0].lower(), words[1:]
    particle = rest.pop(0) if rest and rest[0] in _PARTICLES else ""
    if verb in ("do", "have") or verb in INSPECTIONS or not rest or rest[0] in _OBJECT_ENDS | {"it", "and", "or"}:
        return None
    ends = [
        j
        for j in range(1, len(rest))
        if rest[j] in _OBJECT_ENDS or (rest[j] in ("and", "or") and read(" ".join(rest[j + 1 :])).opens)
    ]
    end = ends[0] if ends else len(rest)
    subject, tail = rest[:end], rest[end:]
    if {"who", "that", "which"} & set(subject):
        return None
    if verb in _IRREGULAR:
        done = _IRREGULAR[verb]
    elif len(verb) <= 4 and verb[-1] not in "aeiouwxy" and verb[-2] in "aeiou" and verb[-3] not in "aeiou":
        done = verb + verb[-1] + "ed"
    else:
        done = _participle(verb)
    text = " ".join(subject)
    return " ".join([text[0].upper() + text[1:], "should be", done, particle, *tail]).replace("  ", " ").strip()


def test_a_changing_step_in_the_passive_is_the_step():
    """Each changing runbook step in the passive ("The leaked key should be revoked immediately", "Non-critical loads
    should be shut down"), in place of the step in the runbook's own steps: every step still stated."""
    done = set()
    for t in TICKETS:
        steps = gold(t)
        for k, s in enumerate(steps):
            said = passive(s)
            if said is None or (t.gold_ids[0], k) in done:
                continue
            done.add((t.gold_ids[0], k))
            verdict = check(t, " ".join(steps[:k] + [said + "."] + steps[k + 1 :]))
            assert verdict.content == 1.0, (t.ticket_id, said, verdict.missed)
    assert len(done) >= 30, len(done)


# ---------------------------------------------------------------------------------------------------------- action
INSPECTING = ("Check", "Verify", "Confirm", "Review", "Inspect", "Look at", "Make sure of", "Examine")
VAGUE = ("Handle", "Address", "Do", "Deal with", "Take care of", "Manage", "Process", "Sort out", "Tackle", "Work on")
OTHER_CHANGES = (
    "Restart",
    "Delete",
    "Install",
    "Block",
    "Escalate",
    "Isolate",
    "Reboot",
    "Unlock",
    "Compress",
    "Grant",
)


def _keywords(step: str) -> str:
    """The step's key words (its own verb among them), stop words out."""
    return " ".join(w for w in re.findall(r"[a-z0-9]+", step.lower()) if w not in STOP_WORDS)


def test_a_verb_that_is_not_the_steps_action_does_not_state_a_changing_step():
    """Every changing step (revoke, rotate, reboot, ...; 53% of the bank's steps), in turn, replaced by an inspection
    verb, a vague verb or another change in front of all its key words (the step's own verb among them, as a noun),
    in the runbook's own steps: that step is not stated, the others are (the review: one generic verb in front of each
    step's key terms beat the honest answer on 20 of 35 tickets)."""
    for i, t in enumerate(TICKETS):
        steps = gold(t)
        for k, step in enumerate(steps):
            action = step_action(step)
            if action.negative or not action.changes or action.principal in {verb_stem(v) for v in INSPECTIONS}:
                continue
            others = [v for v in OTHER_CHANGES if not any(same_action(verb_stem(v.lower()), c) for c in action.changes)]
            for verbs in (INSPECTING, VAGUE, others):
                said = f"{verbs[(i + k) % len(verbs)]} the {_keywords(step)}."
                verdict = check(t, " ".join(steps[:k] + [said] + steps[k + 1 :]))
                assert set(verdict.matched) == set(steps) - {step}, (t.ticket_id, said, verdict.matched)


def test_a_vague_verb_states_no_step_and_an_inspection_only_the_inspections():
    """The whole answer as one verb in front of each step's key words. A vague verb states nothing (0 content on
    every ticket); an inspection verb states at most the runbook's inspection steps (its content is bounded by their
    share: at most 0.75, 0.47 on average over the bank), never a changing one."""
    for i, t in enumerate(TICKETS):
        steps = gold(t)
        inspections = sum(inspection(step_action(s).principal) for s in steps) / len(steps)
        vague = VAGUE[i % len(VAGUE)]
        assert check(t, sentences([f"{vague} the {_keywords(s)}" for s in steps])).content == 0.0, (t.ticket_id, vague)
        verb = INSPECTING[i % len(INSPECTING)]
        verdict = check(t, sentences([f"{verb} the {_keywords(s)}" for s in steps]))
        assert verdict.content <= inspections, (t.ticket_id, verb, verdict.matched)
        assert all(inspection(step_action(s).principal) or s not in verdict.matched for s in steps), (t.ticket_id, verb)


# ---------------------------------------------------------------------------------------------------- retraction
def test_a_retraction_cancels_everything_before_it_on_every_ticket():
    """The honest answer followed by a retraction (cycling over tickets; the review: "... ignore all of the above and
    do nothing" kept 97%), as its own sentence or run into the last one: no content, at most 40% of the honest
    total."""
    resolutions = []
    for i, t in enumerate(TICKETS):
        retraction = RETRACTIONS[i % len(RETRACTIONS)]
        own = t.gold_resolution + " " + retraction
        run_in = t.gold_resolution.rstrip(".") + ", but " + retraction[0].lower() + retraction[1:]
        for resolution in (own, run_in):
            verdict = check(t, resolution)
            assert verdict.content == 0.0 and verdict.retracted >= len(units(t)), (t.ticket_id, resolution)
        resolutions.append(own)
    shares = totals(resolutions, TICKETS) / honest_totals()
    assert float(shares.max()) <= 0.4, float(shares.max())


def test_what_follows_a_retraction_stands():
    """A retraction before the answer, or a wrong start taken back and corrected, leaves the answer that follows."""
    for i, t in enumerate(TICKETS):
        retraction = RETRACTIONS[i % len(RETRACTIONS)]
        assert check(t, retraction + " " + t.gold_resolution).content == 1.0, (t.ticket_id, retraction)
        corrected = "Restart the host and reimage it. " + retraction + " " + t.gold_resolution
        assert check(t, corrected).content == 1.0, (t.ticket_id, corrected)


def test_a_retraction_that_names_a_step_cancels_that_step_only():
    """The honest answer, then one step taken back by name ("actually, don't <step>", "skip <step>ing"): that step
    is not stated, the others are."""
    taken_back = ("Actually, {}.", "On second thought, {}.", "Wait, {}.")
    negators = ("don't {}", "skip {ing}", "never {}", "do not {}")
    for i, t in enumerate(TICKETS):
        steps, said = gold(t), unit_steps(t)
        for j in positive(t):
            back = taken_back[(i + j) % len(taken_back)].format(negated(negators[(i + 2 * j) % 4], units(t)[j]))
            verdict = check(t, sentences(units(t)) + " " + back)
            expected = {s for k, s in enumerate(steps) if k not in said[j]}
            assert set(verdict.matched) == expected, (t.ticket_id, back, verdict.matched)


def test_a_retraction_of_a_pronoun_takes_back_the_latest_step_it_names():
    """ "Revoke the key. Actually, don't revoke it.": right after each changing step, its own verb said not to be done
    of a pronoun takes that step back, and only it."""
    tried = 0
    for i, t in enumerate(TICKETS):
        steps, said = gold(t), unit_steps(t)
        for j in positive(t):
            verb = units(t)[j].split()[0]
            action = step_action(steps[min(said[j])])
            if len(said[j]) != 1 or not action.changes or not action.named_by((verb_stem(verb),)):
                continue
            back = ("Actually, don't {} it.", "Wait, never {} it.", "On second thought, do not {} them.")[i % 3]
            out = units(t)
            resolution = sentences(out[: j + 1]) + " " + back.format(verb) + " " + sentences(out[j + 1 :])
            verdict = check(t, resolution)
            assert set(verdict.matched) == {s for k, s in enumerate(steps) if k not in said[j]}, (
                t.ticket_id,
                resolution,
            )
            tried += 1
    assert tried >= 300, tried


@pytest.mark.parametrize(
    "kept",
    [
        "Don't forget any of the above.",
        "Do not skip any of these steps.",
        "Do not ignore the above.",
        "Ignore the ticket's subject line.",
        "Do not touch anything else.",
    ],
)
def test_what_only_looks_like_a_retraction_cancels_nothing(kept):
    """A negated cancel ("don't forget the above"), a cancel of something that is not the answer (the ticket's
    subject line) and a negation with a thing of its own as object keep the answer whole."""
    for t in TICKETS[:48]:
        assert check(t, t.gold_resolution + " " + kept).content == 1.0, (t.ticket_id, kept)


def test_the_reader_frames_registers_and_polarity():
    """The reading of single clauses, by kind: the framing dropped, the passive made active, negation scoped."""
    assert (read("You should not reboot the server").text, read("You should not reboot the server").negated) == (
        "reboot the server",
        True,
    )
    assert read("Don't forget to revoke the key").negated is False
    assert read("keep the server running (no reboot)").negated is False
    assert "reboot" in read("keep the server running (no reboot)").prohibited
    assert read("The server must not be rebooted").negated is True
    assert read("Rebooting the server is a bad idea").negated is True
    assert read("Confirm the certificate is valid and not revoked").negated is False
    assert read("have the user reconnect over a wired network").verbs == (verb_stem("reconnect"),)
    assert read("If the CRC errors keep rising, you should replace the optic").conditions == {"if"}


@pytest.mark.parametrize("module", ["reading", "inflection"])
def test_the_docstring_examples_hold(module):
    module = importlib.import_module(f"propel.rewards.triage.{module}")
    assert doctest.testmod(module, raise_on_error=True).attempted >= 1
