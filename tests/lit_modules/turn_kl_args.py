"""Tests' shorthand: the turn-KL term's settings given flat (``teacher="ema"``) become the trainers' ``turn_kl``."""

from __future__ import annotations

from dataclasses import fields

from propel.lit_modules.turn_kl import TurnKLSpec

NAMES = {f.name for f in fields(TurnKLSpec)}


def with_turn_kl(kw: dict) -> dict:
    """``kw`` with its ``TurnKLSpec`` fields moved into ``turn_kl``."""
    spec = {k: kw.pop(k) for k in list(kw) if k in NAMES}
    if spec:
        kw["turn_kl"] = TurnKLSpec(**spec)
    return kw
