"""What makes a resolution a right fix: it covers the gold runbook's steps, follows no distractor article's step, and
makes the right escalation call. This is the triage rewards' *content*; the style components are paid in proportion
to it (``gate.py``) and calibration's "correct" is a right fix by this rule (``calibration.py``).

The rule, in order:

1. **Key terms.** A text's key terms are its words after ``normalize`` (NFKC, lookalike letters folded, invisible
   characters removed), lower-cased, Porter-stemmed as ROUGE's tokenizer stems (words of four letters or more),
   without ``STOP_WORDS`` (function words and the generic verbs every runbook uses: check, verify, run, ...; in any
   inflection).
2. **Distinctive and new terms.** A gold step's distinctive terms are its key terms that no distractor step has; a
   distractor step's are those no gold step has (they tell the right runbook from the retrieved wrong ones). A step's
   new terms are those the ticket does not contain (repeating the ticket is not a fix).
3. **A step is matched** when the resolution contains at least half of its key terms and at least two of them (the
   one, for a one-term step); the same of its distinctive terms, when it has any; and at least one of its new terms,
   when it has any. Order is ignored: each step is matched anywhere in the resolution (the bank's reference
   resolutions reorder runbook steps, and so may an engineer). A distractor step without distinctive terms (one the
   gold runbook also has) is never counted as wrong.
4. **Content** = ``clip(matched gold steps / gold steps - matched distractor steps / gold steps, 0, 1)``: each step
   taken from a distractor article cancels one gold step. It is halved (``WRONG_ESCALATION``) when the escalate
   flag is missing or differs from the gold one. A resolution is a *right fix* at content >= ``RIGHT_FIX`` (0.75)
   with the right flag (``TriageCalibration(threshold)``).

Worked examples (``tests/rewards/test_triage_rewards.py`` checks each): the ticket "DNS broken / Users cannot resolve
intranet names since this morning", gold runbook "Internal DNS names do not resolve" (1. Run nslookup against both
internal resolvers. 2. Check the resolver service and its forwarders. 3. Flush the client cache with ipconfig
/flushdns or resolvectl flush-caches. 4. Verify the zone record exists.), the time-sync runbook retrieved as a
distractor (Check the offset with chronyc tracking. Verify the NTP servers are reachable on UDP 123. Restart chronyd.
Force a step with chronyc makestep.), the right flag being "do not escalate":

- "Query both internal resolvers with nslookup, fix the failing forwarder on the resolver service, make sure the
  record exists in the zone and flush the DNS cache on the clients": 4 of 4 steps, no distractor step: 1.0.
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

from propel.rewards.triage.normalize import normalize, words

WRONG_ESCALATION = 0.5
"""Factor on the content of a resolution whose escalate flag is missing or wrong."""
RIGHT_FIX = 0.75
"""Default content at or above which (with the right flag) a resolution counts as a right fix."""
_STOP = """a an the and or but nor of to in on at for with by from via into onto over under as is are was were be been
being it its this that these those there their them they then than if when while so not no do does did done have has
had any all each every some other own same such only also just can could should would may might must will shall your
you we our us he she his her i me my what which who how why where up out off again once here both either too very s t
e g ie eg etc check verify confirm make sure ensure run use look find see get set open"""
STOP_WORDS = frozenset(_STOP.split())
"""Function words and generic runbook verbs: no evidence of which step an answer follows."""


@functools.lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import porter  # a dependency of rouge-score, which propel depends on

    return porter.PorterStemmer()


@functools.lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stem(word) if len(word) > 3 else word


@functools.lru_cache(maxsize=16384)
def key_terms(text: str) -> frozenset[str]:
    """Stemmed words of ``normalize(text)`` without stop words (rule 1)."""
    stems = (_stem(w) for w in words(normalize(text)) if w not in STOP_WORDS)
    return frozenset(s for s in stems if s not in STOP_WORDS)


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
    """Rule 3: enough of the step's key terms are present, enough of its ``distinctive`` terms when it has any, and at
    least one of its ``new`` terms (those the ticket does not contain) when it has any."""
    if not step or not _enough(step, answer):
        return False
    return (not distinctive or _enough(distinctive, answer)) and (not new or bool(new & answer))


@dataclass(frozen=True)
class StepCheck:
    """The verdict on one resolution: which steps it matched and the content value (rule 4)."""

    matched: tuple[str, ...]
    """Gold steps the resolution covers."""
    missed: tuple[str, ...]
    """Gold steps it does not cover."""
    wrong: tuple[str, ...]
    """Distractor steps it follows."""
    escalate_right: bool
    content: float
    """In [0, 1]: the coverage net of wrong steps, halved for a wrong escalate flag."""

    @property
    def coverage(self) -> float:
        return len(self.matched) / max(1, len(self.matched) + len(self.missed))

    def right_fix(self, threshold: float = RIGHT_FIX) -> bool:
        """Content at or above ``threshold`` and the right escalate flag."""
        return self.escalate_right and self.content >= threshold


@functools.lru_cache(maxsize=8192)
def check_steps(
    resolution: str,
    escalate: bool | None,
    gold_steps: tuple[str, ...],
    distractor_steps: tuple[str, ...],
    gold_escalate: bool,
    ticket: str = "",
) -> StepCheck:
    """Rules 1-4 for one resolution against a ticket's gold and distractor steps."""
    answer = key_terms(resolution)
    asked = key_terms(ticket)
    gold = [key_terms(s) for s in gold_steps]
    other = [key_terms(s) for s in distractor_steps]
    gold_all = frozenset().union(*gold)
    other_all = frozenset().union(*other)
    hit = [step_matched(answer, g, g - other_all, g - asked) for g in gold]
    wrong = tuple(
        s
        for s, d in zip(distractor_steps, other, strict=True)
        if d - gold_all and step_matched(answer, d, d - gold_all, d - asked)
    )
    net = (sum(hit) - len(wrong)) / len(gold) if gold else 0.0
    escalate_right = escalate is not None and escalate == gold_escalate
    content = min(1.0, max(0.0, net)) * (1.0 if escalate_right else WRONG_ESCALATION)
    return StepCheck(
        matched=tuple(s for s, h in zip(gold_steps, hit, strict=True) if h),
        missed=tuple(s for s, h in zip(gold_steps, hit, strict=True) if not h),
        wrong=wrong,
        escalate_right=escalate_right,
        content=content,
    )
