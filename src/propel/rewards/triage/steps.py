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
   markers, and a comma, "and" or "then" before another verb); a clause is an instruction when it is in the
   imperative (its first word, past "then", "do not" or a condition closed by a comma, is a verb followed by its
   object) and its articles stand where English puts them. A list of nouns or keywords, with or without commas or
   bullets, and most shuffled sentences state nothing.
4. **A clause states a gold step** when it contains at least half of the step's key terms and at least two of them
   (the one, for a one-term step); the same of its distinctive terms, when it has any; at least one of its new terms,
   when it has any; and no more terms of the other steps (gold or distractor) than of its own, nor more than
   ``FOREIGN_TERMS`` (a shared noun, the object of the next action; the bank's references and runbook steps carry
   at most two against any other runbook). A clause states at most one step, the one whose terms it covers best
   (a run-on clause stuffing several steps' terms, or a keyword dump of all of them, states one step or none). A
   runbook step that holds two actions may be stated by two consecutive instructions that state nothing on their
   own ("reload the service and add an expiry alert").
5. **Order.** The stated steps count in the runbook's order: of the sequence of gold steps the clauses state, the
   chain kept is the non-decreasing subsequence with the most distinct steps and clauses (a step stated again right
   after itself stays on it); every clause off that chain states a step out of order, a wrong step that cancels one
   right one, as a distractor's step does. The steps *in place* are those on the chain that no clause off it
   states (an answer that does a step in two places does not say when to do it). Every runbook is an ordered
   procedure (the bank marks no step whose place is free); the bank's reference resolutions state their runbook's
   steps in its order.
6. **Wrong steps.** A distractor step with distinctive terms is followed when the whole resolution contains enough
   of its terms (rule 4's thresholds, wherever they appear): a wrong step is wrong however it is stated. One without
   distinctive terms (the gold runbook has the same step) is never counted as wrong.
7. **Content** = ``clip((steps in place - clauses off the chain - wrong steps) / gold steps, 0, 1)``, halved
   (``WRONG_ESCALATION``) when the escalate flag is missing or differs from the gold one. It is the resolution
   component's value.
8. **A procedure, or not.** A resolution that follows a wrong step (a distractor's, or a gold step out of order) is
   not the runbook, nor part of it: it keeps its content on the resolution component, but its *procedure* value
   (``StepCheck.procedure``) is 0, so the style components pay nothing on it (``gate.py``) and it is never a right
   fix. One that follows none (the runbook's steps in its order, some perhaps left out) is a procedure worth its
   content. A gold step is out of order when a clause off the chain states it (rule 5), or when it is *said* out of
   order: each instruction is read past a leading condition, as the instructions run together in it without
   punctuation (``clauses.run_together``: "re-push the VPN profile look up the user's attempts in the gateway log"
   is two), and each of those says the step it states (or, stating none, the first whose terms it carries) and every
   later step whose terms it carries, where their terms come; an earlier step's terms are a reference to that step's
   object ("replace the optic if the CRC errors keep rising"), not a step. A resolution is a *right fix* at
   procedure >= ``RIGHT_FIX`` (0.75) with the right flag (``TriageCalibration(threshold)``).

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
from dataclasses import dataclass

from propel.rewards.triage.clauses import action, clauses, instruction, run_together
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
class _Steps:
    """A ticket's gold steps as key terms, with what rule 4 compares a clause against."""

    gold: tuple[frozenset[str], ...]
    distinctive: tuple[frozenset[str], ...]
    new: tuple[frozenset[str], ...]
    everything: frozenset[str]
    """Every key term of every gold and distractor step."""

    def stated(self, clause: frozenset[str]) -> int | None:
        """The gold step the clause's key terms state (rule 4), the best covered one; None when it states none."""
        best, best_share = None, 0.0
        for k, step in enumerate(self.gold):
            own = clause & step
            if not step_matched(clause, step, self.distinctive[k], self.new[k]):
                continue
            if len((clause & self.everything) - step) > min(len(own), FOREIGN_TERMS):
                continue  # as much of the other steps as of its own, or a run of several: not about this step
            share = len(own) / len(step)
            if share > best_share:
                best, best_share = k, share
        return best

    def said(self, clause: str) -> list[int]:
        """Rule 8's reading of an instruction, past a leading condition: the steps said by each instruction run
        together in it (``clauses.run_together``), in order."""
        return [k for part in run_together(action(clause)) for k in self._said(part)]

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
        stated = self.stated(terms)
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


def stated_steps(resolution: str, steps: _Steps) -> list[int]:
    """The gold step each instruction of ``resolution`` states, in clause order (rules 3 and 4; a pair of
    consecutive instructions that state nothing alone may state one step together)."""
    said = [key_terms(c) for c in clauses(resolution) if instruction(c)]
    alone = [steps.stated(terms) for terms in said]
    order, i = [], 0
    while i < len(said):
        k = alone[i]
        if k is None and i + 1 < len(said) and alone[i + 1] is None:
            k = steps.stated(said[i] | said[i + 1])
            if k is not None:
                order.append(k)
                i += 2
                continue
        if k is not None:
            order.append(k)
        i += 1
    return order


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

    @property
    def coverage(self) -> float:
        return len(self.matched) / max(1, len(self.matched) + len(self.missed))

    @property
    def procedure(self) -> float:
        """Rule 8: ``content`` when the resolution follows no wrong step (none out of order, no distractor's), else
        0. What style is gated by and a right fix needs."""
        return 0.0 if self.wrong or self.unordered else self.content

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
    answer = key_terms(resolution)
    asked = key_terms(ticket)
    gold = tuple(key_terms(s) for s in gold_steps)
    other = [key_terms(s) for s in distractor_steps]
    gold_all = frozenset().union(*gold)
    other_all = frozenset().union(*other)
    steps = _Steps(gold, tuple(g - other_all for g in gold), tuple(g - asked for g in gold), gold_all | other_all)
    order = stated_steps(resolution, steps)
    chain = set(in_order(order))
    off = [order[p] for p in range(len(order)) if p not in chain]
    on = sorted({order[p] for p in chain} - set(off))
    said = [k for c in clauses(resolution) if instruction(c) for k in steps.said(c)]
    said_chain = set(in_order(said))
    said_off = [said[p] for p in range(len(said)) if p not in said_chain]
    wrong = tuple(
        s
        for s, d in zip(distractor_steps, other, strict=True)
        if d - gold_all and step_matched(answer, d, d - gold_all, d - asked)
    )
    net = (len(on) - len(off) - len(wrong)) / len(gold) if gold else 0.0
    escalate_right = escalate is not None and escalate == gold_escalate
    content = min(1.0, max(0.0, net)) * (1.0 if escalate_right else WRONG_ESCALATION)
    return StepCheck(
        matched=tuple(gold_steps[k] for k in on),
        missed=tuple(s for k, s in enumerate(gold_steps) if k not in on),
        wrong=wrong,
        escalate_right=escalate_right,
        content=content,
        unordered=tuple(dict.fromkeys(gold_steps[k] for k in off + said_off)),
    )
