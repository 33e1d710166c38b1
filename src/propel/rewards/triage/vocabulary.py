"""The words the content rule reads: stems, stop words, spelling variants and domain synonyms, instruction verbs.

A text becomes a sequence of ``Token``s: its words after ``normalize`` (NFKC, lookalike letters folded, invisible
characters removed), lower-cased, with a hyphenated ``re-`` joined to its verb ("re-run" and "rerun" are one word),
the multi-word phrases of ``PHRASES`` replaced by their one word ("by hand" is "manually"), Porter-stemmed as ROUGE's
tokenizer stems (words of four letters or more), and each stem folded to its canonical stem (``VARIANTS``). Folding
compares stems, so every inflection of a variant folds with it ("neighbours", "wiping", "registered").

``VARIANTS`` is small and explicit on purpose: spelling variants (British and American, joined or split words) and
the synonyms an engineer uses for the runbooks' own words (wipe for reimage, register for enrol), each folding to the
bank's word. It does not fold words that name different actions in the runbooks (restart and reboot, rotate and
replace, purge and remove): a synonym table that merges two steps' words would let one step pass for the other.
``tests/rewards/test_triage_procedure.py`` checks each pair and that no two runbook steps become the same.

``VERBS`` are the verbs an instruction starts from: every runbook step's verb plus common IT verbs, the generic ones
the step rule ignores as evidence (check, verify, run) included; ``clauses.py`` reads them to find where one
instruction ends and the next begins and whether a clause is an instruction at all, with the function words it
places (``LEADING``, ``SUBORDINATORS``, ``ARTICLES``, ``NOT_AFTER_ARTICLE``).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

from propel.rewards.triage.normalize import normalize, words

_STOP = """a an the and or but nor of to in on at for with by from via into onto over under as is are was were be been
being it its this that these those there their them they then than if when while so not no do does did done have has
had any all each every some other own same such only also just can could should would may might must will shall your
you we our us he she his her i me my what which who how why where up out off again once here both either too very s t
e g ie eg etc check verify confirm make sure ensure run use look find see get set open"""
STOP_WORDS = frozenset(_STOP.split())
"""Function words and generic runbook verbs: no evidence of which step an answer follows."""

VARIANTS = {
    # British and American spelling: the bank's spelling is the canonical one
    "neighbour": "neighbor",
    "utilization": "utilisation",
    "utilize": "utilise",
    "center": "centre",
    "fiber": "fibre",
    "license": "licence",
    "analyze": "analyse",
    "prioritize": "prioritise",
    "synchronize": "synchronise",
    "behavior": "behaviour",
    "catalog": "catalogue",
    # a compound written as one word
    "oncall": "call",
    # the runbooks' words in an engineer's other words
    "wipe": "reimage",
    "rebuild": "reimage",
    "register": "enrol",
    "delete": "remove",
    "erase": "remove",
    "config": "configuration",
    "cert": "certificate",
    "creds": "credentials",
    "temporary": "temp",
    "transceiver": "optic",
    "sfp": "optic",
    "quarantine": "isolate",
    "reachable": "reach",
}
"""Variant word -> the bank's word; compared as stems, so every inflection of the variant folds too (pairs the Porter
stemmer already folds, enroll and enrol, manually and manual, need no entry; nor do pairs whose stem another word
shares: "authorize" stems to "author")."""

PHRASES = {
    ("by", "hand"): ("manually",),
    ("e", "mail"): ("email",),
    ("access", "control", "list"): ("acl",),
    ("access", "list"): ("acl",),
    ("datacenter",): ("data", "centre"),
    ("datacentre",): ("data", "centre"),
    ("on", "call"): ("oncall",),
}
"""Multi-word phrases (and compounds) replaced before stemming."""

_VERBS = """activate add allow analyse apply approve archive ask assign attach audit block bounce break call cancel
capture change check clean clear close collect communicate compare compress configure confirm connect contact copy
correct create cut decrypt delete deploy describe detach diagnose disable disconnect document downgrade download
drain edit enable encrypt enrol ensure erase escalate evacuate examine expand export extend fail file filter find
fix flush free follow force gather get give grant graph grow have identify import increase inform inspect install
investigate isolate issue keep kill leave limit locate look lower make measure migrate mitigate modify monitor mount
move note notify open order page patch pause ping preserve prune purge push put query quarantine raise read reboot
rebuild reconnect recover redeploy reduce refresh register reimage reinstall reload remove renew reopen repair
replace reply request reroute reset resize restart restore resume retry revert review revoke roll rotate route run
save scale scan search see send set shed shift shorten shrink shut start step stop submit suspend swap sync take
tell terminate test trace track transfer trigger troubleshoot tune turn unblock uninstall unlock unmount update
upgrade upload use validate verify view walk watch whitelist wipe write"""
VERBS = frozenset(_VERBS.split())
"""Verbs an instruction is built on: the runbook steps' verbs and common IT verbs (compared as stems)."""

_LEADING = """and or but plus then also first second third next finally lastly afterwards now please so do not don t
never dont soft hard gracefully immediately manually quickly carefully"""
LEADING = frozenset(_LEADING.split())
"""Words that may come before an instruction's verb: connectors ("then", "finally"), a negation ("do not reboot the
server") and modifiers ("soft-clear the neighbor", "immediately revoke the key")."""
ARTICLES = frozenset({"a", "an", "the"})
_NOT_AFTER_ARTICLE = """a an the and or but nor of to at for with by from via into onto is are was were be been
being its if when then than"""
NOT_AFTER_ARTICLE = frozenset(_NOT_AFTER_ARTICLE.split())
"""Words that never follow an article ("the the", "the and", "a of"): where a shuffled sentence shows."""
_SUBORDINATORS = "if when once after before unless until while where whenever"
SUBORDINATORS = frozenset(_SUBORDINATORS.split())
"""Words that open a condition in front of an instruction ("if the errors keep rising, replace the optic")."""


class Token(NamedTuple):
    """One word of a text as the content rule reads it."""

    word: str
    """The word (``re-`` joined, ``PHRASES`` replaced), before stemming."""
    stem: str
    """The folded stem (``VARIANTS``)."""
    stop: bool
    """A stop word (``STOP_WORDS``): not a key term."""
    verb: bool
    """An instruction verb (``VERBS``)."""


@functools.lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import porter  # a dependency of rouge-score, which propel depends on

    return porter.PorterStemmer()


@functools.lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """Porter stem of a lower-case word of four letters or more (as ROUGE's tokenizer stems); shorter words as they
    are."""
    return _stemmer().stem(word) if len(word) > 3 else word


@functools.lru_cache(maxsize=1)
def _folds() -> tuple[dict[str, str], frozenset[str]]:
    fold = {stem(variant): stem(canonical) for variant, canonical in VARIANTS.items()}
    return fold, frozenset(fold.get(stem(v), stem(v)) for v in VERBS)


def _joined(raw: list[str]) -> list[str]:
    """Hyphenated ``re-`` joined to its verb, then ``PHRASES`` replaced (longest first)."""
    joined: list[str] = []
    for w in raw:
        if joined and joined[-1] == "re" and w.isalpha():
            joined[-1] = "re" + w
        else:
            joined.append(w)
    out: list[str] = []
    i = 0
    while i < len(joined):
        for n in (3, 2, 1):
            phrase = tuple(joined[i : i + n])
            if len(phrase) == n and phrase in PHRASES:
                out.extend(PHRASES[phrase])
                i += n
                break
        else:
            out.append(joined[i])
            i += 1
    return out


def _verb(word: str, folded: str, verbs: frozenset[str]) -> bool:
    if folded in verbs:
        return True
    return word.startswith("re") and len(word) > 4 and stem(word[2:]) in verbs  # re-push, rerun, reissue


@functools.lru_cache(maxsize=16384)
def tokens(text: str) -> tuple[Token, ...]:
    """The words of ``normalize(text)`` as the content rule reads them (module docstring)."""
    fold, verbs = _folds()
    out = []
    for w in _joined(words(normalize(text))):
        folded = fold.get(stem(w), stem(w))
        out.append(Token(w, folded, w in STOP_WORDS or folded in STOP_WORDS, _verb(w, folded, verbs)))
    return tuple(out)


@functools.lru_cache(maxsize=16384)
def key_terms(text: str) -> frozenset[str]:
    """The folded stems of ``text`` that are not stop words: what a step and an answer are compared on."""
    return frozenset(t.stem for t in tokens(text) if not t.stop)
