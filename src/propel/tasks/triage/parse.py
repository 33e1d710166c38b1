"""Parse a triage answer strictly: exactly one ``submit_resolution`` JSON object with the four fields, or a reason.

Accepted shapes: a bare object whose keys are among the four fields (``submit_resolution {...}``, in a code fence or
not), or a tool call ``{"name": "submit_resolution", "arguments": {...}}`` (arguments as an object or a JSON string).
Nothing is chosen silently: an answer is *rejected* (the rewards pay 0 on every component and log the reason) when it
holds no submission, more than one, a key twice (JSON's "last one wins" would hide the first), a key that is not a
field, or tool-call arguments that are not a JSON object. An accepted submission may still have invalid fields (an
empty resolution, a confidence that is not a number in [0, 1], ...): each is named in ``reason`` and
``field_errors``, and the rewards that read that field pay nothing for it. The parser never raises.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

FIELDS = ("resolution", "citations", "confidence", "escalate")
TOOL_NAME = "submit_resolution"
TOOL_KEYS = ("name", "arguments", "parameters")
REJECTIONS = ("no_submission", "multiple_submissions", "duplicate_keys", "extra_keys", "malformed_arguments")
"""Reasons (the part before any ``:``) for which an answer is rejected as a whole."""
_WORD = re.compile(r"[A-Za-z0-9]")


class _Object(dict):
    """A decoded JSON object that remembers which of its keys appeared more than once."""

    duplicates: tuple[str, ...] = ()


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)
    if len(obj) < len(pairs):
        keys = [k for k, _ in pairs]
        obj.duplicates = tuple(k for k in obj if keys.count(k) > 1)
    return obj


_DECODER = json.JSONDecoder(object_pairs_hook=_pairs)


@dataclass
class Submission:
    """The submission in a completion, with a verdict on the whole answer and on each field."""

    count: int = 0
    """How many submission objects the completion holds (exactly one is accepted)."""
    raw: dict[str, Any] = field(default_factory=dict)
    """The first submission's fields as decoded (empty when there is none). Graded only when not ``rejected``."""
    problem: str | None = None
    """Why the first submission is malformed (``duplicate_keys: ...``, ``extra_keys: ...``), else None."""

    @property
    def found(self) -> bool:
        return self.count > 0

    @property
    def rejected(self) -> bool:
        """The answer cannot be graded: every triage reward pays 0 for it."""
        return self.reason.split(":")[0] in REJECTIONS

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

    @property
    def field_errors(self) -> dict[str, str]:
        """What is wrong with each invalid field (absent, wrong type, or a shortcut that earns nothing)."""
        errors = {}
        for name in FIELDS:
            if name not in self.raw:
                errors[name] = "missing"
        if "resolution" in self.raw and not _WORD.search(self.resolution):
            errors["resolution"] = "no words" if isinstance(self.raw["resolution"], str) else "not a string"
        citations = self.raw.get("citations")
        if "citations" in self.raw and not (isinstance(citations, list) and citations and all(self.citations)):
            errors["citations"] = "not a non-empty list of ids"
        confidence = self.raw.get("confidence")
        if "confidence" in self.raw and self.confidence is None:
            number = isinstance(confidence, int | float) and not isinstance(confidence, bool)
            errors["confidence"] = "not a number in [0, 1]" if number else f"not a number: {confidence!r}"[:60]
        if "escalate" in self.raw and self.escalate is None:
            errors["escalate"] = "not a boolean"
        return {k: errors[k] for k in FIELDS if k in errors}

    def valid_fields(self) -> dict[str, bool]:
        """Per field: present with the right type and not a shortcut (an empty or punctuation-only resolution, an
        empty citation list or an empty id get no credit)."""
        errors = self.field_errors
        return {k: k not in errors for k in FIELDS}

    @property
    def reason(self) -> str:
        """``ok``; a rejection (``REJECTIONS``, with details after ``:``); or ``invalid: <fields>``."""
        if not self.found:
            return "no_submission"
        if self.count > 1:
            return "multiple_submissions"
        if self.problem:
            return self.problem
        bad = list(self.field_errors)
        return "invalid: " + ",".join(bad) if bad else "ok"


def _unwrap(obj: Any) -> tuple[dict[str, Any], str | None] | None:
    """The submission's fields and what is malformed about them, if ``obj`` is a submission; else None."""
    if not isinstance(obj, dict):
        return None
    if obj.get("name") == TOOL_NAME:
        problem = _keys_problem(obj, TOOL_KEYS)
        args = obj.get("arguments", obj.get("parameters"))
        if isinstance(args, str):
            try:
                args = _DECODER.decode(args)
            except json.JSONDecodeError:
                return {}, problem or "malformed_arguments: not JSON"
        if not isinstance(args, dict):
            return {}, problem or "malformed_arguments: not an object"
        return args, problem or _keys_problem(args, FIELDS)
    if not any(k in obj for k in FIELDS):
        return None
    return obj, _keys_problem(obj, FIELDS)


def _keys_problem(obj: dict[str, Any], allowed: tuple[str, ...]) -> str | None:
    duplicates = getattr(obj, "duplicates", ())
    if duplicates:
        return "duplicate_keys: " + ",".join(duplicates)
    extra = [k for k in obj if k not in allowed]
    return "extra_keys: " + ",".join(extra)[:80] if extra else None


def parse_submission(text: str) -> Submission:
    """Every top-level JSON object in ``text`` that is a submission; the first one's fields are kept."""
    found: list[tuple[dict[str, Any], str | None]] = []
    at = text.find("{")
    while at != -1:
        try:
            obj, end = _DECODER.raw_decode(text, at)
        except json.JSONDecodeError:
            at = text.find("{", at + 1)
            continue
        unwrapped = _unwrap(obj)
        if unwrapped is not None:
            found.append(unwrapped)
        at = text.find("{", end)
    if not found:
        return Submission()
    fields, problem = found[0]
    return Submission(count=len(found), raw=dict(fields), problem=problem)
