"""What makes a resolution a right fix: it states the gold runbook's steps as instructions, in the runbook's order,
follows no distractor article's step, and makes the right escalation call. This is the triage rewards' *content*; the
style components are paid in proportion to it when it follows no wrong step (``gate.py``, rule 8) and calibration's
"correct" is a right fix by this rule (``calibration.py``).

The rule, in order:

1. **Key terms.** A text's key terms are its words as ``vocabulary.tokens`` reads them (normalised, ``re-`` joined to
   its verb, Porter-stemmed, spelling variants and domain synonyms folded: neighbour is neighbor, wipe is reimage,
   register is enrol, "by hand" is manually) without ``STOP_WORDS`` (function words and the generic verbs every
   runbook uses: check, verify, run, ...; in any inflection).
2. **Distinctive and new terms.** A gold step's distinctive terms are its key terms that no distractor step has; a
   distractor step's are those no gold step has (they tell the right runbook from the retrieved wrong ones). A step's
   new terms are those the ticket does not contain (repeating the ticket is not a fix).
3. **Instructions.** The resolution is read as clauses (``clauses.py``: sentence ends, semicolons, line breaks, list
   markers, and a comma, "and" or "then" before another verb); a clause is an instruction when, read in the
   imperative (``reading.py``: its framing dropped, "you should", "we will", "it is recommended to", "make sure to";
   a directed passive made active, "the key should be revoked"), its first word, past "then", "do not" or a
   condition closed by a comma, is a verb followed by its object, and its articles stand where English puts them. A
   list of nouns or keywords, with or without commas or bullets, and most shuffled sentences state nothing.
4. **A clause states a gold step** when it contains at least half of the step's key terms and at least two of them
   (the one, for a one-term step); the same of its distinctive terms, when it has any; at least one of its new terms,
   when it has any; and no more terms of the other steps (gold or distractor) than of its own, nor more than
   ``FOREIGN_TERMS`` (a shared noun, the object of the next action; the bank's references and runbook steps carry
   at most two against any other runbook). A clause states at most one step, the one whose terms it covers best
   (a run-on clause stuffing several steps' terms, or a keyword dump of all of them, states one step or none). A
   runbook step that holds two actions may be stated by two consecutive instructions that state nothing on their
   own ("reload the service and add an expiry alert").

   4b. **Polarity and action** (``reading.py``, ``actions.py``). A clause that says not to do its action ("do not
   revoke the key", "you should never revoke it", "avoid revoking it") states no step that says to do it; a step
   that says not to ("Do not reboot the server") is stated only by a clause that says not to do its action ("never
   reboot the server", "keep the server running (no reboot)"). And the clause's verb must do the step's action: a
   step built on an inspection (check, verify, read, review, ...) is done by any verb that is not vague (acting on its
   objects implies looking at them), any other step only by its own verb or a synonym (``actions.SYNONYMS``: revoke or
   disable, rotate or replace); a vague verb (do, handle, address) states nothing. "Check the leaked key" does not
   revoke it. A clause that says to do, under no other condition than the step's, what a "do not" step forbids
   ("reboot the server") *contradicts* that step: a wrong step, as a distractor's is (rules 7 and 8).

   4c. **Retractions** (``retraction.py``). A clause that takes back what came before it cancels those clauses: one
   that refers to the answer itself ("ignore all of the above", "scratch that", "actually, don't do any of this", "do
   nothing") every clause before it, one that names a step ("actually, don't revoke the key") the earlier clauses
   stating that step. What follows a retraction stands.
5. **Order.** The stated steps count in the runbook's order: of the sequence of gold steps the clauses state, the
   chain kept is the non-decreasing subsequence with the most distinct steps and clauses (a step stated again right
   after itself stays on it); every clause off that chain states a step out of order, a wrong step that cancels one
   right one, as a distractor's step does. The steps *in place* are those on the chain that no clause off it
   states (an answer that does a step in two places does not say when to do it). Every runbook is an ordered
   procedure (the bank marks no step whose place is free); the bank's reference resolutions state their runbook's
   steps in its order.
6. **Wrong steps.** A distractor step with distinctive terms is followed when the resolution's clauses that stand
   (not retracted, not saying not to do their action) contain enough of its terms (rule 4's thresholds, wherever they
   appear): a wrong step is wrong however it is stated, and warning against it ("do not restart chronyd") is not
   following it. One without distinctive terms (the gold runbook has the same step) is never counted as wrong.
7. **Content** = ``clip((steps in place - clauses off the chain - wrong steps - contradicted steps) / gold steps, 0,
   1)``, halved (``WRONG_ESCALATION``) when the escalate flag is missing or differs from the gold one. It is the
   resolution component's value.
8. **A procedure, or not.** A resolution that follows a wrong step (a distractor's, a gold step out of order, or what a
   gold step forbids) is not the runbook, nor part of it: it keeps its content on the resolution component, but its
   *procedure* value (``StepCheck.procedure``) is 0, so the style components pay nothing on it (``gate.py``) and it is
   never a right fix. One that follows none (the runbook's steps in its order, some perhaps left out) is a procedure
   worth its content. A gold step is out of order when a clause off the chain states it (rule 5), or when it is *said*
   out of order: each instruction is read past a leading condition, as the instructions run together in it without
   punctuation (``clauses.run_together``: "re-push the VPN profile look up the user's attempts in the gateway log" is
   two), and each of those says the step it states (or, stating none, the first whose terms it carries) and every later
   step whose terms it carries, where their terms come; an earlier step's terms are a reference to that step's object
   ("replace the optic if the CRC errors keep rising"), not a step. A resolution is a *right fix* at procedure >=
   ``RIGHT_FIX`` (0.75) with the right flag (``TriageCalibration(threshold)``).

Why rule 8: every reordering of the gold steps must score at most 60% of the honest answer's total, at whatever
confidence and flag it states. Rules 5 and 7 alone price one swapped pair like two steps left out: it keeps
``(n - 2) / n`` of the content, as much as an honest answer missing two steps, and style and calibration paid it as
such: 68% of the honest total at confidence 0 on a four-step runbook (calibration rightly pays a confidence of 0 on an
answer that is not a right fix), and towards 100% as runbooks grow, since cancelling a fixed number of steps per step
out of place leaves a share that grows with ``n``. Rule 8 bounds it for every ``n``: an answer with a wrong step keeps
at most the parse credit (0.2), its content (below 1; at most ``(n - 2) / n`` with a step out of place, which is neither
in place nor free), grounding (1) and calibration (1 at confidence 0): under 3.2, 53% of the honest 5.99. On the bank's
four-step runbooks a reordering keeps at most 2.7 (45%), 54% of the honest in-order answer at the same confidence (0),
and with the wrong flag 2.45, 59.8% of the honest in-order answer with that flag (4.1). Calibration stays a Brier score
on "is a right fix", not scaled by content: scaled, the best confidence would be ``E[content * right] / E[content]``,
above the chance of being right, which is not calibration. Grounding stays whole: citing the runbook that fixes the
ticket is knowledge of its own.

Worked examples (``tests/rewards/test_triage_rewards.py`` checks each): the ticket "DNS broken / Users cannot resolve
intranet names since this morning", gold runbook "Internal DNS names do not resolve" (1. Run nslookup against both
internal resolvers. 2. Check the resolver service and its forwarders. 3. Flush the client cache with ipconfig
/flushdns or resolvectl flush-caches. 4. Verify the zone record exists.), the time-sync runbook retrieved as a
distractor (Check the offset with chronyc tracking. Verify the NTP servers are reachable on UDP 123. Restart chronyd.
Force a step with chronyc makestep.), the right flag being "do not escalate":

- "Query both internal resolvers with nslookup, fix the failing forwarder on the resolver service, flush the DNS
  cache on the clients and make sure the record exists in the zone": four instructions, steps 1, 2, 3, 4: 1.0.
- The same with its last two instructions swapped (steps 1, 2, 4, 3): three steps on the chain, one off it: 0.5,
  and a procedure of 0 (a step out of order): no style, not a right fix.
- The same with its first instruction said again at the end (steps 1, 2, 3, 4, 1): step 1 is out of order, so not
  in place, and cancels one: (3 - 1) / 4 = 0.5, procedure 0.
- The swapped answer with its last two instructions run together ("... make sure the record exists in the zone flush
  the DNS cache on the clients"): the run-on states no step alone, so steps 1 and 2 count: 0.5; it says step 4, then
  step 3: procedure 0.
- "... then make sure the record for the internal resolvers exists in the zone": step 1's terms after step 4's are a
  reference to its object, not step 1 again: 1.0, a procedure.
- The same four instructions in reverse order: one step on the chain, three off it: 0.
- "nslookup internal resolvers resolver service forwarders flush client cache ipconfig zone record": a word list, not
  a clause that opens with its verb: no instruction: 0.
- "Query both internal resolvers with nslookup and make sure the record exists in the zone": steps 1 and 4: 0.5.
- The same with escalate true: 0.5 * 0.5 = 0.25.
- "restart the dns resolver service" (ROUGE-L 1.0 against the reference "restart the dns resolver service"): step 2
  only ({resolv, servic} of {resolv, servic, forward}, "servic" new): 0.25, not a right fix.
- "Restart the resolver": one term of step 2, and "restart" alone is not enough of "Restart chronyd." ({restart,
  chronyd}): 0.
- "Restart chronyd and step the clock with chronyc makestep": no gold step, 2 distractor steps: 0.
- The ticket pasted back: every term it shares with a step is old: 0. "x", "", an unrelated paragraph: 0.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass

from propel.rewards.triage.actions import agrees, inspection, same_action
from propel.rewards.triage.clauses import action, clauses, instruction, run_together
from propel.rewards.triage.reading import Reading, read
from propel.rewards.triage.retraction import concrete, named, pointed, refers_back
from propel.rewards.triage.vocabulary import STOP_WORDS, key_terms, tokens

WRONG_ESCALATION = 0.5
"""Factor on the content of a resolution whose escalate flag is missing or wrong."""
RIGHT_FIX = 0.75
"""Default procedure value (rule 8) at or above which (with the right flag) a resolution counts as a right fix."""
FOREIGN_TERMS = 2
"""The most key terms of other steps a clause may carry and still state one step (rule 4)."""

__all__ = [
    "FOREIGN_TERMS",
    "RIGHT_FIX",
    "STOP_WORDS",
    "WRONG_ESCALATION",
    "StepCheck",
    "check_steps",
    "in_order",
    "key_terms",
]


def _enough(part: frozenset[str], present: frozenset[str]) -> bool:
    """At least half of ``part`` is present, and never fewer than two terms (all of them when it has fewer)."""
    found = len(part & present)
    return 2 * found >= len(part) and found >= min(2, len(part))


def step_matched(
    answer: frozenset[str],
    step: frozenset[str],
    distinctive: frozenset[str] = frozenset(),
    new: frozenset[str] = frozenset(),
) -> bool:
    """Rule 4's thresholds: enough of the step's key terms are present, enough of its ``distinctive`` terms when it
    has any, and at least one of its ``new`` terms (those the ticket does not contain) when it has any."""
    if not step or not _enough(step, answer):
        return False
    return (not distinctive or _enough(distinctive, answer)) and (not new or bool(new & answer))


@dataclass(frozen=True)
class Action:
    """What a step asks for (rule 4b): its principal verb, the changes it makes, and whether it says not to."""

    principal: str
    """The folded stem of its first verb ("" when it has none: carried by its objects)."""
    changes: frozenset[str]
    """Its verbs that are not inspections (``actions.INSPECTIONS``)."""
    negative: bool
    """It says not to do its action ("Do not reboot the server")."""
    conditions: frozenset[str] = frozenset()
    """The words that open a condition in it ("Do not reimage *before* the security team reviews it")."""

    def done_by(self, verbs: Iterable[str]) -> bool:
        """A clause doing ``verbs`` does this action (``actions.agrees``)."""
        return agrees(verbs, self.principal, self.changes)

    def named_by(self, verbs: Iterable[str]) -> bool:
        """``verbs`` name this action itself: its verb or a synonym, or an inspection for an inspection ("don't revoke
        it" names "Revoke the key", not "Review the logs", which any action on the logs does)."""
        return any(
            same_action(v, c) or (inspection(v) and inspection(self.principal))
            for v in verbs
            for c in {self.principal, *self.changes}
        )


@functools.lru_cache(maxsize=4096)
def step_action(step: str) -> Action:
    """The ``Action`` of one runbook step, read as an answer's clauses are (``reading.read``)."""
    readings = [read(c) for c in clauses(step)]
    verbs = [v for r in readings for v in r.verbs]
    return Action(
        verbs[0] if verbs else "",
        frozenset(v for v in verbs if not inspection(v)),
        bool(readings) and readings[0].negated,
        frozenset().union(*(r.conditions for r in readings)),
    )


@dataclass(frozen=True)
class _Steps:
    """A ticket's gold steps as key terms, with what rule 4 compares a clause against."""

    gold: tuple[frozenset[str], ...]
    distinctive: tuple[frozenset[str], ...]
    new: tuple[frozenset[str], ...]
    everything: frozenset[str]
    """Every key term of every gold and distractor step."""
    actions: tuple[Action, ...]

    def fits(self, k: int, readings: tuple[Reading, ...], opposite: bool = False) -> bool:
        """Rule 4b: the clauses (one, or a pair stating the step together) do step ``k``'s action with the step's
        polarity: one does its action and none says not to (for a step that says not to do something, one says not
        to do it). ``opposite``: they say to do what the step says not to, under no condition the step does not name
        (a contradiction: "reimage after the review" does not contradict "do not reimage before the review")."""
        action = self.actions[k]
        if opposite:
            return (
                action.negative
                and all(not r.negated and r.conditions <= action.conditions for r in readings)
                and any(action.done_by(r.verbs) for r in readings)
            )
        if action.negative:
            return any(action.done_by(r.prohibited) for r in readings)
        return all(not r.negated for r in readings) and any(action.done_by(r.verbs) for r in readings)

    def stated(self, clause: frozenset[str], readings: tuple[Reading, ...] = (), opposite: bool = False) -> int | None:
        """The gold step the clause's key terms state (rule 4) and each of its ``readings`` does (rule 4b), the best
        covered one; None when it states none. ``opposite``: the step it contradicts instead."""
        best, best_share = None, 0.0
        for k, step in enumerate(self.gold):
            own = clause & step
            if not step_matched(clause, step, self.distinctive[k], self.new[k]):
                continue
            if len((clause & self.everything) - step) > min(len(own), FOREIGN_TERMS):
                continue  # as much of the other steps as of its own, or a run of several: not about this step
            if readings and not self.fits(k, readings, opposite):
                continue
            share = len(own) / len(step)
            if share > best_share:
                best, best_share = k, share
        return best

    def said(self, reading: Reading) -> list[int]:
        """Rule 8's reading of an instruction, past its framing and a leading condition: the steps said by each
        instruction run together in it (``clauses.run_together``), in order, with the clause's polarity (a negated
        clause says only the steps that say not to)."""
        found = [k for part in run_together(action(reading.text)) for k in self._said(part)]
        return [k for k in found if self.actions[k].negative == reading.negated or self.fits(k, (reading,))]

    def _said(self, part: str) -> list[int]:
        """The step the instruction states (or, stating none, the first whose terms it carries) and every later step
        whose terms it carries, in the order their terms come. An earlier step's terms are a reference to that
        step's object ("replace the optic if the CRC errors keep rising"), not a step."""
        stems = [t.stem for t in tokens(part) if not t.stop]
        terms = frozenset(stems)
        found = [k for k, step in enumerate(self.gold) if step_matched(terms, step, self.distinctive[k], self.new[k])]

        def place(k: int) -> int:
            """Where the step's first term comes that the other steps found do not share (any of its terms, if none)."""
            own = self.gold[k].difference(*(self.gold[j] for j in found if j != k)) & terms or self.gold[k] & terms
            return min(i for i, term in enumerate(stems) if term in own)

        ordered = sorted(found, key=lambda k: (place(k), k))
        stated = self.stated(terms, (read(part),))
        anchor = ordered.index(stated) if stated in ordered else 0
        return [k for n, k in enumerate(ordered) if n == anchor or k > ordered[anchor]]


def in_order(order: list[int]) -> list[int]:
    """Positions in ``order`` (gold step indices, in clause order) on the chain rule 5 keeps: the non-decreasing
    subsequence with the most distinct steps plus clauses (the earliest such chain)."""
    if not order:
        return []
    score, back = [], []
    for i, k in enumerate(order):
        best, prev = 2, -1
        for j in range(i):
            if order[j] <= k and score[j] + 1 + (order[j] < k) > best:
                best, prev = score[j] + 1 + (order[j] < k), j
        score.append(best)
        back.append(prev)
    end = max(range(len(order)), key=lambda i: (score[i], -i))
    chain = []
    while end >= 0:
        chain.append(end)
        end = back[end]
    return chain[::-1]


_ASIDE = re.compile(r"\(([^()]*)\)")
"""A parenthetical inside a clause."""


@dataclass(frozen=True)
class _Answer:
    """A resolution read against a ticket's steps: which clauses state which step, which contradict one, and which
    a later retraction cancels (rules 3, 4, 4b and 4c)."""

    parts: tuple[str, ...]
    readings: tuple[Reading, ...]
    instructions: tuple[bool, ...]
    units: tuple[tuple[int, int, int], ...]
    """(first clause, last clause, gold step) of each statement of a step, in clause order."""
    contradictions: tuple[tuple[int, int], ...]
    """(clause, gold step) of each clause that says to do what a gold step says not to."""
    retracted: frozenset[int]
    """Clauses a later retraction cancels."""

    @property
    def order(self) -> list[int]:
        """The gold step each statement that stands states, in clause order."""
        return [k for a, b, k in self.units if a not in self.retracted and b not in self.retracted]

    def standing(self) -> list[int]:
        """The clauses no retraction cancels."""
        return [i for i in range(len(self.parts)) if i not in self.retracted]


def read_answer(resolution: str, steps: _Steps) -> _Answer:
    """Rules 3, 4, 4b and 4c: each clause read (``reading.read``), the steps its instructions state (a pair of
    consecutive instructions that state nothing alone may state one step together), the gold steps it contradicts,
    and the clauses its retractions cancel (``retraction.retracts``)."""
    parts = clauses(resolution)
    readings = tuple(read(c) for c in parts)
    said = tuple(instruction(c) for c in parts)
    terms = [key_terms(r.text) for r in readings]
    alone = [steps.stated(terms[i], (readings[i],)) if said[i] else None for i in range(len(parts))]
    units, i = [], 0
    while i < len(parts):
        if alone[i] is None and said[i] and i + 1 < len(parts) and said[i + 1] and alone[i + 1] is None:
            k = steps.stated(terms[i] | terms[i + 1], (readings[i], readings[i + 1]))
            if k is not None:
                units.append((i, i + 1, k))
                i += 2
                continue
        if alone[i] is not None:
            units.append((i, i, alone[i]))
        i += 1
    stating = {p for a, b, _ in units for p in (a, b)}
    contradictions = []
    retracted: set[int] = set()
    pending: tuple[int, frozenset[str]] | None = None
    for i in range(len(parts)):
        if any(pointed(read(a), a) == frozenset() for a in _ASIDE.findall(parts[i])):
            retracted |= set(range(i + 1))  # "(just kidding, do nothing)": an aside takes back its own clause too
            continue
        if i in stating:
            continue
        k = steps.stated(terms[i], (readings[i],), opposite=True) if said[i] else None
        if k is not None:
            contradictions.append((i, k))
            continue
        back = pointed(readings[i], parts[i])
        if back is None:
            continue
        # "revoke the key. Actually, don't revoke it": a step's own verb said not to, of a pronoun, takes back the
        # latest statement of that step (not "don't do any of this", "don't follow the above": the answer itself)
        latest = None
        if (
            readings[i].negated
            and not concrete(back) - set(readings[i].verbs)
            and not refers_back(readings[i], parts[i])
        ):
            earlier = [k for a, b, k in units if b < i and steps.actions[k].named_by(readings[i].verbs)]
            latest = earlier[-1] if earlier else None
        if not back and latest is None:
            retracted |= set(range(i))
            continue
        scope = named(back, steps.gold) if back else None
        if scope is None and pending is not None and pending[0] == i - 1:
            scope = named(back | pending[1], steps.gold)
        scope = latest if scope is None else scope
        pending = (i, back) if scope is None else None
        for a, b, k in units:
            # a condition the statement did not have makes a rule for a case ("ignore the CRC errors if they stay
            # flat"), not the step taken back
            if k == scope and b < i and readings[i].conditions <= readings[a].conditions | readings[b].conditions:
                retracted |= {a, b}
    return _Answer(parts, readings, said, tuple(units), tuple(contradictions), frozenset(retracted))


@dataclass(frozen=True)
class StepCheck:
    """The verdict on one resolution: which steps it states in order, out of order, or from a distractor, and the
    content value (rule 7)."""

    matched: tuple[str, ...]
    """Gold steps the resolution states in place: on the chain, and nowhere out of order."""
    missed: tuple[str, ...]
    """Gold steps not in place."""
    wrong: tuple[str, ...]
    """Distractor steps it follows."""
    escalate_right: bool
    content: float
    """In [0, 1]: the steps in place net of steps out of order and wrong steps, halved for a wrong escalate flag."""
    unordered: tuple[str, ...] = ()
    """Gold steps stated (each such clause cancels one step; none is in place) or said out of the runbook's order."""
    contradicted: tuple[str, ...] = ()
    """Gold steps that say not to do something the resolution says to do (each cancels one step)."""
    retracted: int = 0
    """Clauses a later retraction cancels (rule 4c)."""

    @property
    def coverage(self) -> float:
        return len(self.matched) / max(1, len(self.matched) + len(self.missed))

    @property
    def procedure(self) -> float:
        """Rule 8: ``content`` when the resolution follows no wrong step (none out of order, no distractor's, none
        a gold step forbids), else 0. What style is gated by and a right fix needs."""
        return 0.0 if self.wrong or self.unordered or self.contradicted else self.content

    def right_fix(self, threshold: float = RIGHT_FIX) -> bool:
        """A procedure worth at least ``threshold``, with the right escalate flag."""
        return self.escalate_right and self.procedure >= threshold


@functools.lru_cache(maxsize=8192)
def check_steps(
    resolution: str,
    escalate: bool | None,
    gold_steps: tuple[str, ...],
    distractor_steps: tuple[str, ...],
    gold_escalate: bool,
    ticket: str = "",
) -> StepCheck:
    """Rules 1-8 for one resolution against a ticket's gold and distractor steps."""
    asked = key_terms(ticket)
    gold = tuple(key_terms(s) for s in gold_steps)
    other = [key_terms(s) for s in distractor_steps]
    gold_all = frozenset().union(*gold)
    other_all = frozenset().union(*other)
    actions = tuple(step_action(s) for s in gold_steps)
    steps = _Steps(
        gold, tuple(g - other_all for g in gold), tuple(g - asked for g in gold), gold_all | other_all, actions
    )
    answer = read_answer(resolution, steps)
    order = answer.order
    chain = set(in_order(order))
    off = [order[p] for p in range(len(order)) if p not in chain]
    on = sorted({order[p] for p in chain} - set(off))
    standing = answer.standing()
    said = [k for i in standing if answer.instructions[i] for k in steps.said(answer.readings[i])]
    said_chain = set(in_order(said))
    said_off = [said[p] for p in range(len(said)) if p not in said_chain]
    followed = frozenset().union(*(key_terms(answer.parts[i]) for i in standing if not answer.readings[i].negated))
    wrong = tuple(
        s
        for s, d in zip(distractor_steps, other, strict=True)
        if d - gold_all and step_matched(followed, d, d - gold_all, d - asked)
    )
    contradicted = tuple(dict.fromkeys(gold_steps[k] for i, k in answer.contradictions if i in set(standing)))
    net = (len(on) - len(off) - len(wrong) - len(contradicted)) / len(gold) if gold else 0.0
    escalate_right = escalate is not None and escalate == gold_escalate
    content = min(1.0, max(0.0, net)) * (1.0 if escalate_right else WRONG_ESCALATION)
    return StepCheck(
        matched=tuple(gold_steps[k] for k in on),
        missed=tuple(s for k, s in enumerate(gold_steps) if k not in on),
        wrong=wrong,
        escalate_right=escalate_right,
        content=content,
        unordered=tuple(dict.fromkeys(gold_steps[k] for k in off + said_off)),
        contradicted=contradicted,
        retracted=len(answer.retracted),
    )
