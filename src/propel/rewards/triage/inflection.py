"""Which word is an instruction verb, in any inflection: the reading of registers needs "revoking", "revoked" and
"adding" as the verbs they inflect.

``vocabulary.tokens`` compares Porter stems, which fold most inflections ("revoking" and "revoke" are "revok") but
leave a short verb's unrecognised ("adding" stems to "ad", "add" stays "add") and know no irregular participle
("found", "shut", "rebuilt"). ``base`` takes the inflection off where the stem does not find the verb; ``is_verb``,
``stem``, ``participle`` and ``gerund`` read a word through it.

    >>> base("adding"), base("found"), base("revoked")
    ('add', 'find', 'revoked')
"""

from __future__ import annotations

import functools

from propel.rewards.triage.vocabulary import tokens

IRREGULAR = {
    "found": "find",
    "kept": "keep",
    "left": "leave",
    "sent": "send",
    "built": "build",
    "rebuilt": "rebuild",
    "made": "make",
    "done": "do",
    "got": "get",
    "gotten": "get",
    "taken": "take",
    "given": "give",
    "shown": "show",
    "written": "write",
    "brought": "bring",
    "held": "hold",
    "told": "tell",
    "paid": "pay",
    "undone": "undo",
    "shut": "shut",
    "set": "set",
    "reset": "reset",
    "cut": "cut",
    "put": "put",
    "run": "run",
    "rerun": "rerun",
    "read": "read",
    "seen": "see",
    "bought": "buy",
    "caught": "catch",
    "lost": "lose",
    "shed": "shed",
    "thrown": "throw",
    "withdrawn": "withdraw",
    "drawn": "draw",
    "begun": "begin",
    "chosen": "choose",
}
"""Past participles that do not end in -ed, with their verb."""


def _known(word: str) -> bool:
    read = tokens(word)
    return bool(read) and read[0].verb


@functools.lru_cache(maxsize=65536)
def base(word: str) -> str:
    """The verb ``word`` (lower-case) inflects (``IRREGULAR``; -ing, -ed, -es and -s taken off where the stem does
    not find the verb), or ``word`` itself."""
    word = IRREGULAR.get(word, word)
    if _known(word):
        return word
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            root = word[: -len(suffix)]
            for candidate in (root, root + "e", root[:-1] if root[-1:] == root[-2:-1] else root):
                if _known(candidate):
                    return candidate
    return word


def is_verb(word: str) -> bool:
    """``word`` (lower-case) is an instruction verb (``vocabulary.VERBS``) in any inflection."""
    return _known(base(word))


def stem(word: str) -> str:
    """The folded stem (``vocabulary.tokens``) of the verb ``word`` inflects: what actions are compared on."""
    read = tokens(base(word))
    return read[0].stem if read else ""


def participle(word: str) -> bool:
    """``word`` is a verb's past participle ("revoked", "shut", "rebuilt")."""
    return word in IRREGULAR or (word.endswith(("ed", "en")) and is_verb(word))


def gerund(word: str) -> bool:
    """``word`` is a verb in -ing ("revoking", "adding")."""
    return word.endswith("ing") and is_verb(word)
