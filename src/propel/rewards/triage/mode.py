"""How the triage components pay: ``content_first`` (the default) or ``independent`` (the seed's experiment).

``content_first``: the resolution pays its step content (``steps.py``) and the style components (format beyond the
parse, parsimony, repetition) pay in proportion to the answer's procedure (``gate.py``), so style without a right fix
earns nothing. ``independent``: the six components of the seed's run (seed 003: six independent rewards, equal
weights), each paid on its own: the resolution pays ROUGE-L against the reference resolution and the style
components pay their own measure, ungated. It reproduces the seed and is not the default because it pays style
without content: ``{"resolution": "x", "citations": [gold ids], "confidence": 0, "escalate": <right flag>}`` collects
5 of 6. Grounding and calibration pay the same in both modes. Whatever the mode, every component logs both values
(``<name>_raw`` for a style component: its ungated measure), so the two can be compared on one run.
"""

from __future__ import annotations

from typing import Any

import torch

from propel.errors import ConfigError

CONTENT_FIRST = "content_first"
INDEPENDENT = "independent"
MODES = (CONTENT_FIRST, INDEPENDENT)


def check_mode(mode: str, component: str) -> str:
    """``mode`` if it is one of ``MODES``; else a ``ConfigError`` naming the component and the choices."""
    if mode not in MODES:
        raise ConfigError(
            f"{component}: mode must be one of {list(MODES)} ({CONTENT_FIRST!r}: style gated by content, the default; "
            f"{INDEPENDENT!r}: the seed's six independent components), got {mode!r}"
        )
    return mode


def column(scored: list[dict[str, Any] | None], key: str, default: float = 0.0) -> torch.Tensor:
    """``details[key]`` of every sample of a component's last call (``TriageReward.scored``) as floats, ``default``
    for a rejected answer (it scores 0 everywhere)."""
    return torch.tensor([default if d is None else float(d[key]) for d in scored], dtype=torch.float32)
