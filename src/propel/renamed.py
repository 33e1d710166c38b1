"""Settings that took a new name, old -> new. A stored config or pool manifest from before a rename is read under
today's names, so a folder made by an older propel still resumes (and one whose value changed is still refused)."""

from __future__ import annotations

RENAMED_ARGS = {"generator_max_new_tokens": "max_new_tokens", "generator_temperature": "temperature"}
"""The labeling and evaluation modules' token budget and temperature took the GRPO module's spelling (2026-12-07)."""


def renamed_key(key: str) -> str:
    """``key`` (a bare name or a dotted path) with its last part under today's name."""
    head, dot, last = key.rpartition(".")
    return head + dot + RENAMED_ARGS.get(last, last)


def with_todays_names(settings: dict) -> dict:
    """``settings`` (flat or top-level keys) with every key under today's name."""
    return {renamed_key(k): v for k, v in settings.items()}
