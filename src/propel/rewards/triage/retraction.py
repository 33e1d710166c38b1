"""Retractions: a clause that takes back what the answer said before it cancels those clauses.

An answer is read in order, and a later clause may withdraw earlier ones: "ignore all of the above", "scratch that",
"disregard everything", "actually, don't do any of this", "do nothing", "none of this is needed". What makes a clause a
retraction is its form, not a list of sentences:

- it *takes back* or *declines*: its verb cancels (``actions.CANCELS``: ignore, disregard, forget, scratch, skip,
  ...) and is not negated ("don't forget the above" takes back nothing), or it is negated ("don't do any of this",
  "do nothing", "take no action", a bare "actually, don't"), or it calls what it refers to void ("the above is wrong",
  "none of this is needed");
- and it refers to the answer, not to a thing: past its verb and the words that point back at the answer
  (``DISCOURSE``: above, previous, everything, these steps, what I said, ...), it holds no key term of its own. Such a
  retraction cancels *every clause before it*. One whose remaining terms name a gold step ("skip the heap dump",
  "actually, don't revoke the key"), alone or with the retraction right before it (a step of two actions taken back
  in two clauses), cancels the earlier clauses stating *that step*; so does one that says not to do a stated step's
  action of a pronoun ("revoke the key; actually, don't revoke it": the latest such step, ``steps.py``). One that names
  something else ("don't reboot the core switch") cancels nothing, nor does one with a condition the statement did not
  have ("ignore the CRC errors if they stay flat": a rule for a case) or one that points past the answer ("no further
  action is needed": ``BEYOND``).

A clause that states a step is never a retraction (``steps.py`` reads it first): "do not reboot the server" states the
runbook's "Do not reboot the server". Clauses after a retraction stand: an answer that corrects itself is read as
corrected.
"""

from __future__ import annotations

import functools
import re

from propel.rewards.triage.actions import cancel, vague
from propel.rewards.triage.reading import FILLER, NEGATORS, Reading, logical_words
from propel.rewards.triage.vocabulary import tokens

_REFERENCES = """above previous preceding earlier prior foregoing before everything everythin anything all whole said
say wrote written mentioned suggested listed step steps instruction instructions advice suggestion suggestions answer
recommendation recommendations plan procedure list point points part parts rest line lines message response reply
thing things stuff item items lot action actions nothing none whatsoever"""
REFERENCES = frozenset(_REFERENCES.split())
"""Words that refer to the answer itself ("the above", "everything I said", "these steps") or to nothing."""
_POINTERS = """something mind me myself actually instead wait sorry oh ok okay well hmm second thought rather after
again just really fine entirely completely altogether bit here thanks"""
DISCOURSE = REFERENCES | frozenset(_POINTERS.split())
"""Words that point back at the answer (or at nothing) instead of naming a thing: what a global retraction's object is
made of."""
_VOID = "wrong incorrect mistaken mistake invalid obsolete moot irrelevant unnecessary useless pointless kidding joking"
VOID = frozenset(_VOID.split())
"""Predicates that call what they refer to void ("the above is wrong")."""
_NEEDED = """need needs needed necessary required apply applies applicable matter matters relevant valid needful
warranted"""
NEEDED = frozenset(_NEEDED.split())
"""Predicates that void what they refer to when negated ("none of this is needed")."""
_BEYOND = "further else more additional extra besides beyond other"
BEYOND = frozenset(_BEYOND.split())
"""Words that point past what was said ("no further action is needed", "do nothing else"): such a clause closes the
answer, it takes nothing back (``_closing``)."""
_CARRY_OUT = "do take make perform follow apply implement execute carry act proceed"
CARRY_OUT = frozenset(_CARRY_OUT.split())
"""Verbs whose object is the answer's steps themselves ("don't follow the above", "take no action"): they name no
thing of their own."""
_NUMBER = re.compile(r"^\d+$")
EVERYTHING = -1
"""The scope of a retraction of every clause before it."""


@functools.lru_cache(maxsize=8)
def _stems(words: frozenset[str]) -> frozenset[str]:
    return frozenset(t.stem for w in words for t in tokens(w))


@functools.lru_cache(maxsize=1)
def _ignored() -> tuple[frozenset[str], frozenset[str]]:
    """Stems that name no thing (``DISCOURSE``, ``FILLER``, ``CARRY_OUT``, negators), and the void predicates'
    stems."""
    return _stems(DISCOURSE | FILLER | CARRY_OUT | NEGATORS), _stems(VOID | NEEDED)


def pointed(reading: Reading, clause: str) -> frozenset[str] | None:
    """None when ``clause`` (read as ``reading``) takes nothing back; else its key terms (its cancelling or vague verb
    left out), empty when past the words that point back at the answer it has none: it refers to the answer itself,
    everything before it."""
    words = [w for w in logical_words(clause) if w != ","]
    negated_anywhere = bool(NEGATORS & set(words)) or "none" in words or "nothing" in words
    cancels = any(cancel(v) for v in reading.verbs)
    marker = (
        (cancels and not reading.negated)
        or (reading.negated and not cancels)
        or bool(VOID & set(words))
        or (negated_anywhere and bool(NEEDED & set(words)))
    )
    pointing, void = _ignored()
    if not marker or _closing(words, pointing | void):
        return None
    pointing_verbs = {v for v in reading.verbs if cancel(v) or vague(v) or v in _stems(CARRY_OUT)}
    terms = frozenset(t.stem for t in tokens(" ".join(words)) if not t.stop and t.stem not in pointing_verbs)
    own = concrete(terms) | (terms & set(reading.verbs))  # its own verb names an action ("never step it")
    return terms if own else frozenset()


def refers_back(reading: Reading, clause: str) -> bool:
    """``clause`` (read as ``reading``) holds a word that refers to the answer itself (``REFERENCES``: "the above",
    "these steps"), its verb aside ("never step it")."""
    return any(w in REFERENCES and tokens(w)[0].stem not in reading.verbs for w in logical_words(clause) if w != ",")


def concrete(terms: frozenset[str]) -> frozenset[str]:
    """``terms`` less those that point back at the answer or call it void: the things a retraction names."""
    pointing, void = _ignored()
    return frozenset(t for t in terms if t not in pointing | void and not _NUMBER.match(t))


def _closing(words: list[str], pointing: frozenset[str]) -> bool:
    """A ``BEYOND`` word that points past the answer ("no further action", "nothing else", "no other changes are
    needed"), not one that qualifies a thing ("replace all other secrets")."""
    for j, w in enumerate(words):
        if w in BEYOND:
            after = tokens(words[j + 1]) if j + 1 < len(words) else ()
            if not after or after[0].stop or after[0].stem in pointing or after[0].stem in {"action", "chang"}:
                return True
    return False


def named(terms: frozenset[str], steps: tuple[frozenset[str], ...]) -> int | None:
    """The gold step (key terms ``steps``) a retraction's ``terms`` name: two of its key terms (the one of a one-term
    step), the one sharing most; None when they name none."""
    found = [k for k, step in enumerate(steps) if len(terms & step) >= min(2, len(step))]
    return max(found, key=lambda k: (len(terms & steps[k]), len(terms & steps[k]) / len(steps[k]))) if found else None


def retracts(reading: Reading, clause: str, steps: tuple[frozenset[str], ...]) -> int | None:
    """What ``clause`` (read as ``reading``, stating no step) takes back: ``EVERYTHING`` before it, the index of the
    one gold step (key terms ``steps``) it names, or None when it is no retraction."""
    terms = pointed(reading, clause)
    if terms is None:
        return None
    return EVERYTHING if not terms else named(terms, steps)
