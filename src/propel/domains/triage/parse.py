"""Parse a triage answer: find the ``submit_resolution`` JSON object(s) and check each field on its own.

The parser never raises and never rejects the whole answer for one bad field: the format reward pays per valid
field, and the other rewards read the fields that are there. Accepted shapes: a bare object with any of the four
fields (``submit_resolution {...}``, in a code fence or not), or a tool call ``{"name": "submit_resolution",
"arguments": {...}}`` (arguments as an object or a JSON string). Only the first submission is graded.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

FIELDS = ("resolution", "citations", "confidence", "escalate")
TOOL_NAME = "submit_resolution"
_WORD = re.compile(r"[A-Za-z0-9]")


@dataclass
class Submission:
    """The first submission in a completion, with a validity verdict per field."""

    count: int = 0
    """How many submission objects the completion holds (exactly one is asked for)."""
    raw: dict[str, Any] = field(default_factory=dict)
    """The first submission's fields as decoded (empty when there is none)."""

    @property
    def found(self) -> bool:
        return self.count > 0

    @property
    def resolution(self) -> str:
        """The resolution text ("" when missing or not a string)."""
        value = self.raw.get("resolution")
        return value if isinstance(value, str) else ""

    @property
    def citations(self) -> list[str]:
        """Cited ids as given, stripped (non-string entries become "": they match no article)."""
        value = self.raw.get("citations")
        if not isinstance(value, list):
            return []
        return [v.strip() if isinstance(v, str) else "" for v in value]

    @property
    def confidence(self) -> float | None:
        """The confidence when it is a number in [0, 1], else None."""
        value = self.raw.get("confidence")
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return None
        return float(value) if 0.0 <= value <= 1.0 else None

    @property
    def escalate(self) -> bool | None:
        value = self.raw.get("escalate")
        return value if isinstance(value, bool) else None

    def valid_fields(self) -> dict[str, bool]:
        """Per field: present with the right type and not a shortcut (an empty or punctuation-only resolution, an
        empty citation list or an empty id get no credit)."""
        citations = self.raw.get("citations")
        return {
            "resolution": bool(_WORD.search(self.resolution)),
            "citations": isinstance(citations, list) and bool(citations) and all(self.citations),
            "confidence": self.confidence is not None,
            "escalate": self.escalate is not None,
        }

    @property
    def reason(self) -> str:
        """``ok``, ``no_submission``, ``multiple_submissions`` or ``invalid: <fields>``."""
        if not self.found:
            return "no_submission"
        bad = [k for k, ok in self.valid_fields().items() if not ok]
        if bad:
            return "invalid: " + ",".join(bad)
        return "multiple_submissions" if self.count > 1 else "ok"


def _unwrap(obj: Any) -> dict[str, Any] | None:
    """The submission's fields if ``obj`` is one (bare or as a tool call), else None."""
    if not isinstance(obj, dict):
        return None
    if obj.get("name") == TOOL_NAME:
        args = obj.get("arguments", obj.get("parameters"))
        if isinstance(args, str):
            try:
                args = json.loads(args)
            except json.JSONDecodeError:
                return {}
        return args if isinstance(args, dict) else {}
    return obj if any(k in obj for k in FIELDS) else None


def parse_submission(text: str) -> Submission:
    """Every top-level JSON object in ``text`` that is a submission; the first one is kept."""
    decoder = json.JSONDecoder()
    found: list[dict[str, Any]] = []
    at = text.find("{")
    while at != -1:
        try:
            obj, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        fields = _unwrap(obj)
        if fields is not None:
            found.append(fields)
        at = text.find("{", end)
    return Submission(count=len(found), raw=found[0] if found else {})
