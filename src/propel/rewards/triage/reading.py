"""How one clause reads: its polarity, its register normalised to the imperative, and the action it does.

The content rule compares instructions with runbook steps. An answer may state one in many registers and may say not
to do it; ``read`` turns a clause into a ``Reading``:

- **Register.** A modal ("you should / must / need to / have to restart the service"), a declarative ("we will
  restart", "I'd restart", "I recommend restarting"), an impersonal ("it is recommended to restart", "the next step is
  to restart", "best to restart") or a mandate ("make sure to restart", "don't forget to restart") frames the
  imperative: the framing words are dropped and ``text`` starts at the verb. A directed passive ("the service should
  be restarted", "make sure the key is revoked") becomes the active imperative ("restarted the service"); one without
  a modal ("the deployment was updated yesterday") reports a fact and is none. A directive to a named subject ("the
  user should reconnect") and a delegation ("ask the user to reconnect", "have the user enrol the device", "get a
  drive ordered") do the handed action.
- **Polarity.** A negator in front of the verb, in the framing or as its object (not, never, no, don't, won't,
  can't, avoid, refrain from, skip ...ing, there is no need to, under no circumstances, do *nothing*, take *no*
  action, "rebooting it is a bad idea") negates the clause: it says not to do its action (``negated``). Negators are
  scoped to their clause, and one inside it ("keep the server running (no reboot)", "restart it without rebooting the
  host") negates only the verb it stands before (``prohibited``). Two cancel ("don't forget to restart" restarts).
- **Action.** ``verbs`` holds the folded stems (``inflection.stem``) of the verb the clause does, the verbs
  coordinated with it ("rotate and compress the logs") and those of instructions it runs on into ("revoke it, replace
  the other secrets"); ``actions.agrees`` compares them with a step's.

The reading is about form: it does not decide what a clause means, only which verb it puts in the imperative and
whether it says not to. A clause it cannot frame keeps its text and reads as it did before (a keyword list is still
not an instruction).

    >>> r = read("You should not reboot the server")
    >>> r.text, r.negated
    ('reboot the server', True)
    >>> read("The leaked key must be revoked immediately").text
    'revoked The leaked key immediately'
    >>> read("keep the server running (no reboot)").prohibited == frozenset({"reboot"})
    True
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from propel.rewards.triage.actions import cancel, vague
from propel.rewards.triage.inflection import IRREGULAR, gerund, is_verb, participle, stem
from propel.rewards.triage.normalize import normalize
from propel.rewards.triage.vocabulary import LEADING, PHRASES, SUBORDINATORS

NEGATORS = frozenset({"not", "never", "no", "neither", "nor"})
"""Words that negate the verb they stand before."""
_AUX = """should must need needs to will shall would can could may might ought better want wants going gonna wanna
gotta are am is be been d ll also now then first definitely probably just really please immediately quickly always
still absolutely strongly ideally sure careful certain"""
AUX = frozenset(_AUX.split())
"""Modal and auxiliary words between a subject and its verb ("you should", "we'll have to", "I'd")."""
SUBJECTS = frozenset({"i", "we", "you", "u", "someone", "somebody", "one", "everyone", "anyone"})
"""Subjects a declarative or modal register addresses an action to (not "they": a ticket describes its users)."""
_FILLER = "actually instead rather wait sorry oh ok okay well hmm simply kindly certainly obviously basically honestly"
_FILLER += " so ever yes"
FILLER = frozenset(_FILLER.split()) | (LEADING - NEGATORS - {"do", "don", "t", "dont"})
"""Words that may open a clause before its framing or its verb (``vocabulary.LEADING`` among them)."""
_IMPERSONAL = """recommended advisable best wise necessary important essential required needed need prudent sensible
good a an idea critical vital crucial imperative advised safest safe safer better time worth mandatory key helpful
useful preferable expected standard practice"""
IMPERSONAL = frozenset(_IMPERSONAL.split())
"""Words of an impersonal framing ("it is recommended to", "it would be a good idea to", "there is no need to")."""
_RECOMMEND = (
    "recommend recommends recommended suggest suggests suggested advise advises propose proposes urge prefer consider"
)
RECOMMEND = frozenset(_RECOMMEND.split())
"""Verbs of a recommendation framing ("I recommend revoking", "consider revoking", "I suggest you revoke")."""
_OPENER_NOUNS = """step steps thing things fix solution remedy action actions move course option plan approach
priority workaround recommendation recommendations advice answer task job"""
_OPENER_ADJECTIVES = """next first second third last final best right only recommended suggested immediate obvious
simplest quickest safest usual standard correct proper"""
_OPENER = re.compile(
    r"(?:(?:the|my|our|your|a|an) )?(?:(?:{adjectives}) )*(?:{nouns})(?: of action)?(?: to do)?"
    r"(?: (?:would|will|should|might))?(?: be| is| are)(?: (?:to|that))?(?= )".format(
        adjectives="|".join(_OPENER_ADJECTIVES.split()), nouns="|".join(_OPENER_NOUNS.split())
    )
)
"""An opener naming the next action: "the next step is to", "my recommendation would be to", "first thing to do is"."""
_WHAT_TO_DO = re.compile(
    r"(?:what|all) (?:{subjects})(?: [a-z]+){{0,3}}? do (?:is|would be)(?: to)?(?= )".format(
        subjects="|".join(SUBJECTS)
    )
)
"""An opener "what you need to do is", "all we have to do is"."""
_PHRASES = {
    ("never", "mind"): ("ignore",),
    ("nevermind",): ("ignore",),
    ("under", "no", "circumstances"): ("never",),
    ("in", "no", "case"): ("never",),
    ("at", "no", "point"): ("never",),
    ("at", "no", "time"): ("never",),
    ("by", "no", "means"): ("never",),
    ("on", "second", "thought"): ("actually",),
    ("on", "second", "thoughts"): ("actually",),
    ("advise", "against"): ("avoid",),
    ("recommend", "against"): ("avoid",),
    ("warn", "against"): ("avoid",),
    ("hold", "off", "on"): ("avoid",),
    ("hold", "off"): ("avoid",),
    ("instead", "of"): ("without",),
    ("rather", "than"): ("without",),
    ("take", "care", "of"): ("handle",),
    ("deal", "with"): ("handle",),
    ("see", "to"): ("handle",),
    ("follow", "up", "on"): ("handle",),
    ("cannot",): ("can", "not"),
    ("dont",): ("do", "not"),
    ("doesnt",): ("does", "not"),
    ("didnt",): ("did", "not"),
    ("shouldnt",): ("should", "not"),
    ("mustnt",): ("must", "not"),
    ("neednt",): ("need", "not"),
    ("isnt",): ("is", "not"),
}
"""Multi-word framings, negations and vague verbs read as one word; contractions written without an apostrophe."""
_CONTRACTED_NOT = {"won": "will", "shan": "shall", "ain": "is", "can": "can"}
_CONTRACTED = {"d": "would", "ll": "will", "ve": "have", "re": "are", "s": "is"}
_PRONOUNS = frozenset({"i", "we", "you", "they", "it", "that", "there", "who", "what", "here"})
_BE = frozenset({"be", "been", "being", "is", "are", "was", "were", "get", "gets", "got", "gotten"})
_ADVERBS_TEXT = "immediately also first then now right away manually again quickly promptly asap fully properly safely"
_ADVERBS = frozenset(_ADVERBS_TEXT.split()) | {"always", "only", "just", "still", "already"}
_PERSONS_TEXT = """user users them him her customer customers requester owner owners team everyone someone staff
employee employees caller reporter member members people colleague colleagues engineer engineers admin admins person"""
_PERSONS = frozenset(_PERSONS_TEXT.split())
_DELEGATES_TEXT = "ask have tell get let instruct remind walk help make need"
_DELEGATES = frozenset(_DELEGATES_TEXT.split())
"""Verbs that hand their action to someone ("ask the user to reconnect"): the clause does the handed action."""
_GERUND_NEGATORS = frozenset({"avoid", "skip", "refrain", "abstain", "stop", "quit", "cease"})
"""Verbs that negate the verb they are followed by in -ing ("avoid rebooting", "refrain from rebooting")."""
_NEGATIVE_VERDICTS_TEXT = """forbidden prohibited discouraged unnecessary unsafe dangerous risky bad harmful unwise
inadvisable pointless useless avoided skipped"""
_NEGATIVE_VERDICTS = frozenset(_NEGATIVE_VERDICTS_TEXT.split())
"""Predicates that say an action is not to be done ("rebooting the server is a bad idea")."""
_POSITIVE_VERDICTS_TEXT = """recommended allowed advised needed required necessary permitted ok okay acceptable fine
safe wise good advisable essential important idea"""
_POSITIVE_VERDICTS = frozenset(_POSITIVE_VERDICTS_TEXT.split())
"""Predicates that say an action is to be done ("revoking the key is recommended"; negated: not to be)."""
_DETERMINERS_TEXT = (
    "the a an all any every each its their this these those that our your his her my some both other old"
)
_DETERMINERS = frozenset(_DETERMINERS_TEXT.split())
_PREPOSITIONS_TEXT = "of for on in from with to at by via under behind inside within"
_PREPOSITIONS = frozenset(_PREPOSITIONS_TEXT.split())
_FUNCTION_TEXT = "but nor then than so it they them there what which who how why do does did"
_NOT_IN_NOUN_PHRASE = _BE | AUX | NEGATORS | SUBJECTS | SUBORDINATORS | frozenset(_FUNCTION_TEXT.split())
_DIRECTIVE_TEXT = "should must need needs to will shall would can could may might ought better"
_DIRECTIVE = frozenset(_DIRECTIVE_TEXT.split())
"""A passive states an action when a modal directs it ("should be restarted", "needs to be removed"); one without
("the deployment was updated yesterday") reports a fact."""
_DIRECTIVE_TO_SUBJECT = frozenset({"should", "must", "need", "needs", "ought", "shall"})
"""Modals that direct a named subject ("the user should reconnect"); not can, may or will, which describe."""
_NOTHING = frozenset({"nothing", "none", "no"})


@dataclass(frozen=True)
class Reading:
    """One clause as the content rule reads it."""

    text: str
    """The clause as an imperative: its framing dropped, a passive made active; the clause itself if it has none."""
    verbs: tuple[str, ...]
    """Folded stems of the action it does and the verbs coordinated with it (a delegation's handed action); () when
    it has no verb where an instruction's goes."""
    negated: bool
    """It says not to do its action."""
    prohibited: frozenset[str]
    """Folded stems of every verb it says not to do: its own when negated, and any a negator inside it stands before
    ("no reboot", "without rebooting")."""
    conditions: frozenset[str]
    """The words that open a condition in it (``vocabulary.SUBORDINATORS``: if, when, once, after, before, ...)."""
    opens: bool
    """It opens with an instruction's verb (past its framing) directly followed by a word, a retraction's verb or a
    directed passive: where a sentence may be cut before it (``clauses._soft_split``)."""


# --------------------------------------------------------------------------------------------------------- words
_TOKEN = re.compile(r"[a-z0-9]+|,")


def _logical(clause: str) -> tuple[list[str], list[int]]:
    """The clause's words and commas (lower-case) with contractions, ``re-``, ``_PHRASES`` and ``vocabulary.PHRASES``
    ("on-call" is "oncall") read as words, and the character offset in ``normalize(clause)`` each starts at."""
    lowered = normalize(clause).lower()
    raw = [(m.group(), m.start()) for m in _TOKEN.finditer(lowered)]
    out: list[tuple[str, int]] = []
    i = 0
    while i < len(raw):
        w, at = raw[i]
        nxt = raw[i + 1][0] if i + 1 < len(raw) else ""
        prev = out[-1][0] if out else ""
        if nxt == "t" and (w in _CONTRACTED_NOT or (w.endswith("n") and len(w) > 2)):
            out += [(_CONTRACTED_NOT.get(w, w[:-1]), at), ("not", at)]
            i += 2
            continue
        if prev in _PRONOUNS and w in _CONTRACTED and lowered[at - 1 : at] in ("'", "\u2019"):
            out.append((_CONTRACTED[w], at))
        elif prev == "let" and w == "s":
            out.append(("us", at))
        elif w == "re" and nxt.isalpha():
            out.append(("re" + nxt, at))
            i += 1
        else:
            out.append((w, at))
        i += 1
    words, offsets, i = [], [], 0
    while i < len(out):
        for n in (3, 2, 1):
            phrase = tuple(w for w, _ in out[i : i + n])
            read_as = _PHRASES.get(phrase) or PHRASES.get(phrase) if len(phrase) == n else None
            if read_as:
                words += read_as
                offsets += [out[i][1]] * len(read_as)
                i += n
                break
        else:
            words.append(out[i][0])
            offsets.append(out[i][1])
            i += 1
    return words, offsets


def logical_words(clause: str) -> list[str]:
    """The clause's words and commas as ``read`` reads them: lower-case, contractions expanded ("don't" is "do not",
    "I'd" is "I would"), ``re-`` joined to its verb, multi-word framings and vague verbs as one word."""
    return _logical(clause)[0]


def _past_filler(words: list[str], i: int) -> int:
    """The index of the first word from ``i`` on that is not a ``FILLER`` word or a comma."""
    while i < len(words) and (words[i] in FILLER or words[i] == ","):
        i += 1
    return i


def _at(words: list[str], i: int) -> str:
    return words[i] if 0 <= i < len(words) else ""


# ------------------------------------------------------------------------------------------------------- framing
def _impersonal_to(words: list[str], i: int) -> int | None:
    """Past an impersonal framing without a subject ("best to", "a good idea to"): the index after its "to"."""
    end = next((j for j in range(i + 1, min(len(words), i + 4)) if words[j] == "to"), None)
    return end + 1 if end is not None and set(words[i + 1 : end]) <= IMPERSONAL else None


def _frame(words: list[str], i: int) -> tuple[int, bool, list[str]]:
    """Past the framing from ``i``: the index of the verb it frames, whether the framing negates it, and the
    ``vocabulary.LEADING`` words it passed ("then", "immediately": words a step may hold)."""
    negated, subject, kept = False, False, []
    while i < len(words):
        w, nxt = words[i], _at(words, i + 1)
        match = _OPENER.match(" ".join(words[i:]) + " ") or _WHAT_TO_DO.match(" ".join(words[i:]) + " ")
        if match:
            subject, i = True, i + match.group().count(" ") + 1
        elif w == "," or w in FILLER:
            kept += [w] if w in LEADING else []
            i += 1
        elif w == "no" and nxt == ",":  # "No, do not ...": an answer to the ticket, not a negator
            i += 1
        elif w in NEGATORS and (w != "no" or gerund(nxt) or nxt in ("need", "further", "more")):
            negated, i = not negated, i + 1
        elif w in ("do", "does", "did") and nxt in NEGATORS:
            i += 1
        elif w in SUBJECTS or (w == "let" and nxt == "us"):
            subject, i = True, i + (2 if w == "let" else 1)
        elif w in ("it", "there") and nxt in ("is", "would", "will", "might", "may", "could", "should", "was"):
            subject, i = True, i + 1
        elif w in IMPERSONAL and _impersonal_to(words, i) is not None:
            subject, i = True, _impersonal_to(words, i)
        elif (subject and (w in AUX or w in IMPERSONAL or w == "that")) or (w in AUX and nxt in SUBJECTS):
            i += 1
        elif w in ("have", "has", "had", "got", "get", "need", "needs") and nxt == "to":
            subject, i = True, i + 2
        elif subject and w in ("have", "has", "had") and (nxt == "been" or participle(nxt)):
            i += 1
        elif w in ("make", "be") and nxt == "sure" and _at(words, i + 2) in ("to", "that", *SUBJECTS):
            subject, i = True, i + 2
        elif w == "ensure" and nxt in ("that", *SUBJECTS):
            subject, i = True, i + 1
        elif w in ("remember", "try", "proceed", "continue", "start", "begin") and nxt in ("to", "by"):
            subject, i = True, i + 2
        elif w == "try" and gerund(_at(words, _past_filler(words, i + 1))):
            subject, i = True, i + 1
        elif w == "go" and nxt == "ahead":
            subject, i = True, i + 2
        elif w in ("forget", "fail", "neglect", "hesitate") and nxt == "to":
            negated, subject, i = not negated, True, i + 2
        elif w in RECOMMEND:
            subject, i = True, i + 1
        elif w in _GERUND_NEGATORS and (gerund(_at(words, _past_filler(words, i + 1))) or nxt == "from"):
            negated, subject, i = not negated, True, i + (2 if nxt == "from" else 1)
        else:
            break
    return i, negated, kept


def _mandate(words: list[str], i: int) -> int | None:
    """Where the state a mandate asks for starts ("make sure (that) | ensure (that) | see to it that" + "the key is
    revoked"), or None."""
    if words[i : i + 2] in (["make", "sure"], ["be", "sure"]):
        j = i + 2
    elif words[i : i + 1] == ["ensure"]:
        j = i + 1
    elif words[i : i + 4] == ["see", "to", "it", "that"]:
        j = i + 4
    else:
        return None
    return j + 1 if _at(words, j) == "that" else j


# -------------------------------------------------------------------------------------------------------- action
def _coordinated(words: list[str], h: int) -> tuple[list[str], int]:
    """The verb at ``h`` and the verbs coordinated with it ("rotate and compress", "check, revoke and rotate"), and
    the index after them."""
    found, j = [words[h]], h + 1
    while j + 2 < len(words) and words[j] in ("and", "or", ",") and is_verb(words[j + 1]) and words[j + 2] != ",":
        found.append(words[j + 1])
        j += 2
    return found, j


def _run_on(words: list[str], after: int) -> list[str]:
    """The verbs of the instructions a clause runs on into after a connector ("revoke it, replace all other
    secrets", "fix the config or raise the memory limit"): a verb right after a comma, and, or or then, followed by a
    word."""
    return [
        words[j]
        for j in range(max(after, 1), len(words) - 1)
        if words[j - 1] in (",", "and", "or", "then") and is_verb(words[j]) and words[j + 1] != ","
    ]


def _handed(words: list[str], h: int) -> str | None:
    """A delegation's handed verb ("ask the user to reconnect", "have the user enrol", "get a drive ordered")."""
    if stem(words[h]) not in {stem(d) for d in _DELEGATES}:
        return None
    for j in range(h + 1, min(len(words), h + 7)):
        w, between = words[j], words[h + 1 : j]
        if w == ",":
            return None
        if w in ("to", "through", "into") and is_verb(_at(words, j + 1)):
            return words[j + 1]
        if between and words[h] in ("have", "get") and participle(w):
            return w
        if between and is_verb(w) and _PERSONS & set(between):
            return w
    return None


# ------------------------------------------------------------------------------------------- subjects, passives
def _noun_phrase(words: list[str]) -> bool:
    """``words`` read as a subject: a determiner or none, then words that are not function words, joined by "and",
    "or" or a preposition ("the access logs for the key", "memory and disk evidence"); a shuffled sentence seldom is
    one."""
    i = 1 if words and words[0] in _DETERMINERS else 0
    content = False
    while i < len(words):
        w = words[i]
        if w in _PREPOSITIONS or w in ("and", "or"):
            if not content or i + 1 == len(words):
                return False
            i += 2 if words[i + 1] in _DETERMINERS and i + 2 < len(words) else 1
            content = False
            continue
        if w == "," or w in ("a", "an", "the") or w in _NOT_IN_NOUN_PHRASE:
            return False
        content, i = True, i + 1
    return content


def _passive(words: list[str], start: int, directed: bool = False) -> tuple[int, int, int, bool] | None:
    """A directed passive from ``start``: (subject start, subject end, participle index, negated) for "the service
    should (not) be restarted" (``directed``: a mandate directs it, "make sure the key is revoked"); None when the
    clause is not one."""
    for b in range(start + 1, min(len(words), start + 14)):
        if words[b] not in _BE:
            continue
        a = b
        while a > start and (words[a - 1] in AUX or words[a - 1] in NEGATORS or words[a - 1] in _BE):
            a -= 1
        if a == start or a - start > 8 or not _noun_phrase(words[start:a]):
            return None
        p = b + 1
        while p < len(words) and (words[p] in _ADVERBS or words[p] in NEGATORS):
            p += 1
        if p < len(words) and participle(words[p]) and (directed or _DIRECTIVE & set(words[a:b])):
            return start, a, p, sum(w in NEGATORS for w in words[a:p]) % 2 == 1
    return None


def _subject_directive(words: list[str], start: int) -> tuple[int, int, bool] | None:
    """A directive to a named subject from ``start``: (subject end, verb index, negated) for "the user should
    reconnect", "the on-call team must not swap the disk"; None when the clause is not one (a modal of ability,
    "users cannot resolve names", describes)."""
    for a in range(start + 1, min(len(words), start + 9)):
        if words[a] not in _DIRECTIVE_TO_SUBJECT:
            continue
        if not _noun_phrase(words[start:a]):
            return None
        d = a
        while d < len(words) and (words[d] in AUX or words[d] in NEGATORS or words[d] in ("have", "has")):
            d += 1
        if d < len(words) and words[d] not in _BE and is_verb(words[d]) and not participle(words[d]):
            return a, d, sum(w in NEGATORS for w in words[a:d]) % 2 == 1
        return None
    return None


# ------------------------------------------------------------------------------------------------------ polarity
def _said_not_to(words: list[str], h: int) -> bool:
    """The verb at ``h`` is negated as an instruction is ("never escalate", "do not escalate", "we won't escalate"),
    not as a participle describing a state ("valid and not revoked")."""
    before = _at(words, h - 1)
    return is_verb(words[h]) and (before == "never" or (before == "not" and _at(words, h - 2) in AUX | {"do", "did"}))


def _prohibited(words: list[str]) -> set[str]:
    """Stems of the verbs a negator inside the clause stands before ("no reboot", "without rebooting")."""
    out = set()
    skip = {"be", "been", "being", "to", "any", "further", "more", "the", "a", "an", "ever", "do", "from", "yet"}
    for j, w in enumerate(words):
        if w not in NEGATORS and w not in ("without", *_GERUND_NEGATORS):
            continue
        for k in range(j + 1, min(len(words), j + 4)):
            if words[k] in skip:
                continue
            if is_verb(words[k]):
                out.add(stem(words[k]))
            break
    return out


def _verdict(words: list[str], after: int) -> bool | None:
    """For a clause opening with a verb in -ing ("rebooting the server is a bad idea"): whether its predicate says not
    to do it (True), to do it (False), or says neither (None)."""
    j = next((j for j in range(after, len(words)) if words[j] in ("is", "are", "be", "was")), None)
    if j is None:
        return None
    tail = set(words[j + 1 : j + 6])
    negated = len(tail & NEGATORS) % 2 == 1
    if _NEGATIVE_VERDICTS & tail:
        return not negated
    return negated if _POSITIVE_VERDICTS & tail else None


# ---------------------------------------------------------------------------------------------------------- read
@dataclass(frozen=True)
class _Clause:
    """A clause being read: its text, words, their offsets, where its action part starts (past a leading
    condition), its conditions and the verbs a negator inside it stands before."""

    text: str
    words: list[str]
    offsets: list[int]
    start: int
    conditions: frozenset[str]
    prohibited: set[str]

    def reading(self, text: str, verbs: list[str], negated: bool, opens: bool) -> Reading:
        stems = tuple(stem(v) for v in verbs)
        prohibited = frozenset(self.prohibited | (set(stems) if negated else set()))
        return Reading(text, stems, negated, prohibited, self.conditions, opens)

    def active(self, h: int, negated: bool, kept: list[str], start: int | None = None, subject: str = "") -> Reading:
        """The reading with its verb at ``h`` (the framing from ``start`` dropped, the ``kept`` words and a named
        ``subject`` kept)."""
        words, start = self.words, self.start if start is None else start
        kind = stem(words[h])
        if (vague(kind) or kind == "take") and _at(words, h + 1) in NEGATORS | _NOTHING:
            negated = not negated  # "do nothing", "take no action"
        verbs, after = _coordinated(words, h)
        handed = _handed(words, h)
        verbs = ([handed] if handed is not None else verbs) + _run_on(words, after)
        if gerund(words[h]) and h == start:
            verdict = _verdict(words, after)
            negated = negated if verdict is None else negated != verdict
        opens = (
            cancel(kind)
            or (negated and _said_not_to(words, h))  # "..., do not escalate": a prohibition needs no object
            or (_at(words, h + 1) not in ("", ",") and (is_verb(words[h]) or vague(kind)))
        )
        text = self.text
        if h > start:
            rest = text[self.offsets[h] :] + (f" ({subject})" if subject else "")
            text = text[: self.offsets[start]] * bool(start) + "".join(w + " " for w in kept) + rest
        return self.reading(text, verbs, negated, opens)

    def passive(self, found: tuple[int, int, int, bool], negated: bool) -> Reading:
        """The reading of a directed passive, made active ("revoked the leaked key")."""
        a, b, p, passive_negated = found
        words, offsets = self.words, self.offsets
        negated ^= passive_negated ^ bool(_NOTHING & set(words[a:b]))  # "nothing needs to be done"
        subject = self.text[offsets[a] : offsets[b]].strip()
        rest = self.text[offsets[p + 1] :] if p + 1 < len(words) else ""
        rewritten = f"{IRREGULAR.get(words[p], words[p])} {subject} {rest}".strip()
        text = self.text[: offsets[self.start]] + rewritten if self.start else rewritten
        handed = words[p + 2] if _at(words, p + 1) == "to" and is_verb(_at(words, p + 2)) else words[p]
        return self.reading(text, [handed], negated, True)


@functools.lru_cache(maxsize=65536)
def read(clause: str) -> Reading:
    """The ``Reading`` of one clause (the module docstring)."""
    words, offsets = _logical(clause)
    start = words.index(",") + 1 if words and words[0] in SUBORDINATORS and "," in words else 0
    this = _Clause(normalize(clause), words, offsets, start, frozenset(SUBORDINATORS & set(words)), _prohibited(words))
    h, negated, kept = _frame(words, start)
    where = _mandate(words, _past_filler(words, start))
    found = _passive(words, where, directed=True) if where is not None else None
    if found is not None:
        return this.passive(found, negated)
    head = _at(words, h)
    if head and (is_verb(head) or vague(stem(head)) or cancel(stem(head))):
        return this.active(h, negated, kept)
    directive = _subject_directive(words, h) if head else None
    if directive is not None:
        a, d, directed_negated = directive
        subject = this.text[offsets[h] : offsets[a]].strip()
        return this.active(d, negated ^ directed_negated, [], start=h, subject=subject)
    found = _passive(words, h if head else start)
    if found is not None:
        return this.passive(found, negated)
    return this.reading(this.text, [], negated, False)
