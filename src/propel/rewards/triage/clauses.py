"""How the content check and the copy check both read a text: as a sequence of clauses, each one instruction.

``clauses`` cuts ``normalize(text)`` at *hard* boundaries: sentence ends (``.``, ``!``, ``?`` before a space or the
end), semicolons, a colon before a space, line breaks and list markers (``-``, ``*``, bullets, ``1.``, ``2)``, ``(3)``);
and inside a sentence at *soft* boundaries: a comma, "and", "then", "but" or "plus" where the words before it already
form an instruction and the words after it open another one (a verb, past a register, followed by a word, not a comma:
"is valid and not revoked, ask the user" cuts before "ask", not before "not revoked"; or a retraction: "..., but ignore
all of that"). "Remove stale leases and shorten the lease time" is two clauses; "Check the resolver service and its
forwarders", "Rotate and compress logs" and "Verify the peer IP, remote AS and MD5 password" are one each (a list of
objects stays with its verb). For the order alone (``steps.py`` rule 8), ``run_together`` also cuts a clause where
instructions run together without punctuation.

An ``instruction`` is a clause in the imperative, read past its register (``reading.read``: "you should", "we will", "it
is recommended to", "make sure to" dropped, a directed passive made active): its first word, past the words that may
lead a verb (``vocabulary.LEADING``: "then", "do not", "soft", "immediately") and past a leading condition closed by a
comma ("if the errors keep rising, replace the optic"), is a verb (``vocabulary.VERBS``, in any inflection) followed by
a word, not a comma, and a key term follows it (its object); and its function words stand where English puts them
(``well_formed``). Whether it says to do its action or not to is ``reading.read``'s polarity, not part of being an
instruction. A list of nouns or keywords is not an instruction, nor a clause whose verb comes later ("the disk failed",
"neighbor state show bgp summary"), nor a comma-separated list ("collect, email, headers"), nor a sentence whose words
were shuffled ("purge message from all the via"). A terse line that starts with its verb ("restart chronyd", "flush
client dns cache") is one: the rule reads form, not meaning, and that line states the step (so does a shuffle that
happens to keep its verb in front and its function words in plausible places).

    >>> clauses("Read the agent's log, fix connectivity or free space on the target; re-run the job.")
    ("Read the agent's log", 'fix connectivity or free space on the target', 're-run the job')
    >>> [instruction(c) for c in ("restart chronyd", "chronyd ntp servers udp 123", "the disk failed")]
    [True, False, False]
"""

from __future__ import annotations

import functools
import re

from propel.rewards.triage.inflection import is_verb
from propel.rewards.triage.normalize import normalize, words
from propel.rewards.triage.reading import read
from propel.rewards.triage.retraction import EVERYTHING, retracts
from propel.rewards.triage.vocabulary import ARTICLES, LEADING, NOT_AFTER_ARTICLE, SUBORDINATORS, VERBS, tokens

_HARD = re.compile(r"[.!?]+(?=\s|$)|[;\n\r]+|:(?=\s)|(?:^|(?<=\s))(?:\(?\d{1,2}[.)]|[-*\u2022\u2023\u25e6])(?=\s)")
_WORD_OR_COMMA = re.compile(r"[a-z0-9]+|,")
_HYPHENATED = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*|,")
_SOFT = frozenset({",", "and", "then", "but", "plus"})
_CONNECTORS = re.compile(r"^[\s,]*(?:(?:and|or|then|but|plus)\b[\s,]*)*", re.IGNORECASE)


def _opens_instruction(words: list[str], j: int) -> bool:
    """The words from ``j`` on, past commas, ``LEADING`` words and a framing ("you should", "we need to":
    ``reading.read``), start with a verb (``re`` then a verb counts) directly followed by a word, as an instruction's
    does ("and not revoked, ask the user" opens none: a participle closing the clause before it), or with a passive
    ("and the key should be revoked") or a retraction's verb ("and ignore the above")."""
    rest = " ".join(words[j:])
    return read(rest).opens or retracts(read(rest), rest, ()) == EVERYTHING


def _ends(clause: str, at: str) -> bool:
    """``clause`` may end before the connector ``at`` ("," or a word): an instruction, or a clause with a verb where
    an instruction's goes and a word after it, whatever that is ("revoke it", "don't revoke it"), or without one at a
    comma ("don't reboot, restart chronyd"; not "do not rotate" of "do not rotate and compress the logs", where the
    two verbs share their object and the negation)."""
    if instruction(clause):
        return True
    reading = read(clause)
    said = words(clause)
    return bool(reading.verbs) and reading.opens and bool(said) and (at == "," or not is_verb(said[-1]))


def well_formed(clause: str) -> bool:
    """Its articles stand where English puts them: never right before a word an article never precedes
    (``NOT_AFTER_ARTICLE``: "the the", "the and", "a of"), where a sentence whose words were shuffled usually shows;
    a terse line without articles ("restart chronyd") always passes. The rule reads pairs of neighbouring words only,
    so words appended to a clause never make it well formed."""
    said = [t.word for t in tokens(clause)]
    return not any(w in ARTICLES and nxt in NOT_AFTER_ARTICLE for w, nxt in zip(said, said[1:], strict=False))


def action(clause: str) -> str:
    """``clause`` past a leading condition closed by a comma ("if the errors keep rising, replace the optic"): the
    action it asks for."""
    items = _WORD_OR_COMMA.findall(normalize(clause).lower())
    return clause.split(",", 1)[1] if items and items[0] in SUBORDINATORS and "," in clause else clause


@functools.lru_cache(maxsize=16384)
def instruction(clause: str) -> bool:
    """A well-formed clause (``well_formed``) whose first word, past ``LEADING`` words, a leading condition closed by
    a comma and a framing (a modal, declarative, impersonal or passive register: ``reading.read``), is a verb directly
    followed by a word (not a comma: "collect, email, headers" is a list), with a key term (its object) after the
    verb."""
    clause = read(clause).text
    if not well_formed(clause):
        return False
    items = _WORD_OR_COMMA.findall(normalize(action(clause)).lower())
    j = 0
    while j < len(items) and (items[j] == "," or items[j] in LEADING):
        j += 1
    if j < len(items) and items[j] == "re":
        j += 1
    if j + 1 >= len(items) or not is_verb(items[j]) or items[j + 1] == ",":
        return False
    return any(not t.stop for t in tokens(" ".join(w for w in items[j + 1 :] if w != ",")))


def _imperative(word: str) -> bool:
    """``word`` is an instruction verb as an imperative writes it: its base form (``vocabulary.VERBS``), ``re``
    joined or not ("activity" and "files" share a stem with a verb, and are none)."""
    return word in VERBS or (word.startswith("re") and word[2:] in VERBS)


def run_together(clause: str) -> list[str]:
    """``clause`` cut where instructions run together without punctuation ("make sure the record exists flush the
    cache"): before every inner imperative verb, after a space and not right before another verb (that one opens the
    instruction), where the words before it and the words from it on are both instructions."""
    found = list(_HYPHENATED.finditer(clause.lower()))
    cuts = [0]
    for i in range(1, len(found)):
        at, word = found[i].start(), found[i].group().replace("-", "")
        if not (clause[at - 1].isspace() and _imperative(word)):
            continue
        if i + 1 < len(found) and is_verb(found[i + 1].group()):
            continue
        if instruction(clause[cuts[-1] : at]) and instruction(clause[at:]):
            cuts.append(at)
    return [clause[a:b].strip() for a, b in zip(cuts, [*cuts[1:], len(clause)], strict=True)]


def _soft_split(sentence: str) -> list[str]:
    found = list(_WORD_OR_COMMA.finditer(sentence.lower()))
    lowered = [m.group() for m in found]
    cuts, start = [], 0
    for i, w in enumerate(lowered):
        if w not in _SOFT or i == start:
            continue
        left = sentence[found[start].start() : found[i].start()]
        if _ends(left, w) and _opens_instruction(lowered, i):
            cuts.append(found[i].start())
            start = i
    bounds = [0, *cuts, len(sentence)]
    return [sentence[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]


@functools.lru_cache(maxsize=16384)
def clauses(text: str) -> tuple[str, ...]:
    """The clauses of ``normalize(text)`` in order, without leading connectors and commas; clauses without a word
    are dropped."""
    out = []
    for sentence in _HARD.split(normalize(text)):
        for part in _soft_split(sentence):
            part = _CONNECTORS.sub("", part).strip(" \t,")
            if words(part):
                out.append(part)
    return tuple(out)
