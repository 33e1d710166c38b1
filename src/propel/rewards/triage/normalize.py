"""Normalise text before any triage reward counts or compares it, so that a disguise changes nothing.

``normalize`` applies Unicode NFKC (full-width letters, ligatures and non-breaking spaces become their plain forms),
folds the Cyrillic and Greek letters that look like Latin ones to Latin (``CONFUSABLES``, from Unicode TR39's
confusables: the rewards compare English words, where a lookalike letter is only ever a disguise), and then replaces
every invisible character by ``invisible``: format characters (Unicode category Cf: zero-width space, zero-width
(non-)joiner, word joiner, BOM, soft hyphen, bidi marks, tag characters), control characters (category Cc) other
than tab, newline and carriage return, variation selectors and the Hangul fillers that render as nothing.

Removed (``invisible=""``), an invisible character inside a word rejoins the word; read as a space
(``invisible=" "``), one between words separates them. A reward that counts picks the reading that costs the answer
more: parsimony counts words with invisibles as spaces ("restart\\u200bthe\\u200bresolver" is three words, not
one), the loop and copy checks take the larger value of both readings. An honest answer has no invisible characters,
so both readings give it the same value. Counting a whole completion starts from ``readable``: its JSON string
literals decoded, so that an escape (``\\u200b``, ``\\u0020`` for a space, ``\\u0061`` for "a") counts as the
character it stands for.

    >>> words(normalize("Ｆｌｕｓｈ the\u200bDNS ca\u00adche"))
    ['flush', 'thedns', 'cache']
    >>> words(normalize("Ｆｌｕｓｈ the\u200bDNS ca\u00adche", invisible=" "))
    ['flush', 'the', 'dns', 'ca', 'che']
"""

from __future__ import annotations

import functools
import json
import re
import unicodedata

_WORDS = re.compile(r"[a-z0-9]+")
CONFUSABLES = str.maketrans(
    "\u0430\u0435\u0456\u0458\u043e\u0440\u0441\u0443\u0445\u0455\u0501\u051b\u051d\u04bb\u04cf\u043a"
    "\u0410\u0412\u0415\u0406\u0408\u041a\u041c\u041d\u041e\u0420\u0421\u0422\u0425\u04ae\u0405"
    "\u03bf\u03bd\u03b9\u03ba\u03c1\u03c5\u03c7\u0391\u0392\u0395\u0396\u0397\u0399\u039a\u039c\u039d"
    "\u039f\u03a1\u03a4\u03a5\u03a7",
    "aeijopcyxsdqwhlkABEIJKMHOPCTXYSovikpuxABEZHIKMNOPTYX",
)
"""Cyrillic and Greek letters that render like Latin ones, mapped to the Latin letter."""
_KEEP = {"\t", "\n", "\r"}
_JSON_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_FILLERS = {"\u115f", "\u1160", "\u3164", "\uffa0", "\u2800"}


def _invisible(ch: str) -> bool:
    if ch in _KEEP:
        return False
    if ch in _FILLERS or "\ufe00" <= ch <= "\ufe0f" or "\U000e0100" <= ch <= "\U000e01ef":
        return True
    return unicodedata.category(ch) in ("Cf", "Cc")


@functools.lru_cache(maxsize=8192)
def normalize(text: str, invisible: str = "") -> str:
    """NFKC, lookalike letters folded to Latin, then every invisible character replaced by ``invisible`` ("" removes
    it, " " makes it a separator)."""
    text = unicodedata.normalize("NFKC", text)
    if text.isascii() and text.isprintable():
        return text
    text = text.translate(CONFUSABLES)
    return "".join(invisible if _invisible(ch) else ch for ch in text)


def _decoded(match: re.Match) -> str:
    try:
        return json.loads(match.group())
    except json.JSONDecodeError:
        return match.group()


@functools.lru_cache(maxsize=4096)
def readable(completion: str) -> str:
    """``completion`` with every JSON string literal replaced by its decoded value (quotes dropped), repeated while
    that changes it (tool-call arguments nest JSON in a string): the text as the reader of the answer sees it."""
    for _ in range(3):
        decoded = _JSON_STRING.sub(_decoded, completion)
        if decoded == completion:
            break
        completion = decoded
    return completion


def words(text: str) -> list[str]:
    """Lower-case ASCII alphanumeric words (what the loop, copy and step checks compare); normalise first."""
    return _WORDS.findall(text.lower())


def word_count(text: str) -> int:
    """Whitespace-separated words of ``readable(text)`` with invisible characters read as spaces (what parsimony
    counts)."""
    return len(normalize(readable(text), invisible=" ").split())
