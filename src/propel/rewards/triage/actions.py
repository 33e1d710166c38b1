"""Whether a clause's verb does a runbook step's action: the verb kinds and the action synonyms the content rule reads.

A step is an action done to some objects. Which action matters depends on the verb's kind:

- **Inspections** (``INSPECTIONS``: check, verify, confirm, read, review, trace, ... and the generic verbs the runbooks
  use the same way, ``vocabulary.STOP_WORDS``' run, use, open, set, get, find, look, see): a step whose action is one
  is carried by its objects. Any action on them states it ("Check the resolver service" is done by "restart the
  resolver if a forwarder is failing": acting on the object implies looking at it), except a vague one.
- **Vague verbs** (``VAGUE``: do, handle, address, deal with, take care of, ...): they name no action of their own,
  so they state no step, whatever follows them. "Address the leaked key" does not revoke it.
- **Every other verb** changes something: a step whose action is one is stated only by a clause doing that action,
  its own verb or a synonym (``SYNONYMS``: revoke and disable, rotate and replace, fail over and move, ...). A verb in
  front of the step's words is not the step's action: "Check the leaked key" does not revoke it, "Reboot the server"
  is not "Shut down non-critical loads".

``SYNONYMS`` are groups of verbs that do the same thing to the runbooks' objects, compared as folded stems
(``inflection.stem``), so every inflection agrees ("revoking", "revoked"); a verb may sit in several groups (get:
collect, order). Unlike ``vocabulary.VARIANTS`` they fold nothing: a clause must still carry the step's key terms;
they only decide whether its verb does the step's action. ``tests/rewards/test_triage_polarity.py`` checks that every
bank reference still states its runbook's steps and that inspection, vague and other changing verbs in front of a
changing step's words state nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from propel.rewards.triage.inflection import stem

_INSPECTIONS = """check verify confirm ensure make run use look find see get set open read review inspect examine test
query measure identify locate trace search investigate diagnose compare audit scan view analyse monitor watch graph
plot chart describe observe determine validate track study evaluate assess list show print grep tail ping probe debug
troubleshoot inventory lookup"""
INSPECTIONS = frozenset(_INSPECTIONS.split())
"""Verbs that look at their objects (and the runbooks' generic verbs): a step built on one is carried by its
objects."""

_VAGUE = """do does did doing done handle address deal manage process tackle sort treat attend perform execute action
work carry proceed act"""
VAGUE = frozenset(_VAGUE.split())
"""Verbs that name no action of their own: they state no step."""

_CANCELS = "ignore disregard forget scratch cancel discard drop retract withdraw undo skip strike void abandon leave"
CANCELS = frozenset(_CANCELS.split())
"""Verbs that take back what an answer said when their object is the answer itself ("ignore the above", "scratch
that"): ``retraction.py``."""

SYNONYMS = (
    "revoke disable deactivate invalidate cancel kill expire suspend void retire",
    "rotate replace change renew regenerate reissue cycle reset update refresh swap recreate",
    "restart reboot bounce reload relaunch cycle recycle",
    "flush clear purge empty reset drop invalidate",
    "clear remove delete purge clean prune free flush empty erase uninstall evict",
    "purge remove delete clear pull recall",
    "block blacklist blocklist deny ban filter blackhole sinkhole reject",
    "isolate disconnect cut unplug detach contain segregate segment sever",
    "preserve keep save retain capture collect image snapshot dump copy secure hold store",
    "collect gather get grab pull save capture take export copy extract obtain retrieve fetch download record dump",
    "reimage reinstall format redeploy reprovision",
    "escalate page notify alert hand transfer forward refer assign call contact inform raise",
    "call contact phone ring notify inform tell page email message communicate update announce alert open raise "
    "file log report reach engage involve",
    "request order obtain get issue procure buy purchase acquire raise file submit apply ask generate create source",
    "issue grant provide give generate create hand send provision assign",
    "install deploy apply put load import upload add attach",
    "add set create configure enable put attach include append insert",
    "unlock unblock reenable reactivate release",
    "update change set save edit correct replace reset refresh modify renew",
    "grant give assign allow add attach permit provide issue",
    "raise increase bump extend expand grow scale double enlarge widen lift resize upgrade",
    "shorten reduce lower decrease cut trim shrink limit",
    "fix repair correct resolve remedy restore adjust edit change patch amend",
    "roll revert rollback downgrade undo restore",
    "fail move switch shift reroute redirect migrate swing steer divert transfer route",
    "activate enable start turn bring switch launch engage trigger invoke power",
    "stop shut halt terminate suspend pause kill disable deallocate decommission",
    "shut shed stop power turn switch drop halt unload",
    "push repush deploy send distribute reinstall install apply reapply resend redeploy",
    "reconnect connect retry rejoin",
    "enrol register add pair activate link configure",
    "force step sync synchronise resync slew",
    "compress zip gzip archive pack",
    "rerun run retry trigger repeat redo restart kick launch start",
)
"""Verbs that do the same thing to the runbooks' objects, one group a line."""


def verb_stem(word: str) -> str:
    """The folded stem a verb is compared on (``inflection.stem``: stemmed, variants folded, ``re-`` joined)."""
    return stem(word)


@functools.lru_cache(maxsize=1)
def _lexicon() -> tuple[frozenset[str], frozenset[str], dict[str, frozenset[int]], frozenset[str]]:
    inspections = frozenset(verb_stem(w) for w in INSPECTIONS)
    vague = frozenset(verb_stem(w) for w in VAGUE)
    cancels = frozenset(verb_stem(w) for w in CANCELS)
    groups: dict[str, set[int]] = {}
    for g, line in enumerate(SYNONYMS):
        for w in line.split():
            groups.setdefault(verb_stem(w), set()).add(g)
    return inspections, vague, {stem: frozenset(gs) for stem, gs in groups.items()}, cancels


def cancel(stem: str) -> bool:
    """The verb (a folded stem) takes back what it refers to."""
    return stem in _lexicon()[3]


def inspection(stem: str) -> bool:
    """The verb (a folded stem) looks at its objects."""
    return stem in _lexicon()[0]


def vague(stem: str) -> bool:
    """The verb (a folded stem) names no action of its own."""
    return stem in _lexicon()[1]


def same_action(a: str, b: str) -> bool:
    """Two verbs (folded stems) do the same thing: the same verb, or verbs of one ``SYNONYMS`` group."""
    groups = _lexicon()[2]
    return a == b or bool(groups.get(a, frozenset()) & groups.get(b, frozenset()))


def agrees(verbs: Iterable[str], principal: str, changes: Iterable[str]) -> bool:
    """Whether a clause doing ``verbs`` (folded stems) does a step's action: the step's ``principal`` verb (its first)
    and the ``changes`` it makes (its verbs that are not inspections). A step whose principal verb is an inspection (or
    that has none) is done by any verb that is not vague; any other step only by one of its changes or a synonym."""
    verbs = [v for v in verbs if v and not vague(v)]
    if not verbs:
        return False
    if not principal or inspection(principal):
        return True
    return any(same_action(v, c) for v in verbs for c in changes)
