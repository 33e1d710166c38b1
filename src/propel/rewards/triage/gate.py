"""The content gate: a style component pays in proportion to the answer's procedure, so style without a right fix
earns nothing.

Format (beyond the parse), parsimony and repetition measure *how* an answer is written. Paid on their own they
outweighed the knowledge terms: ``{"resolution": "x", "citations": [gold ids], "confidence": 0, "escalate": <right
flag>}`` collected 5.0 of 6. Gated, each pays ``base + (1 - base) * style * procedure``, where ``style`` is the
component's own measure in [0, 1], ``procedure`` the resolution's step verdict (``steps.StepCheck.procedure``, in
[0, 1]: its content when it follows no wrong step, else 0) and ``base`` what any accepted answer earns (format's credit
for a single well-formed submission; 0 for the others). A content-free answer, and one with a step out of the
runbook's order or a distractor's step, keeps only ``base``, its resolution content, grounding and calibration (which
still pays for an honest low confidence on a wrong answer); an answer stating half the gold steps in order gets half
of each style component.

The ungated value, ``base + (1 - base) * style`` (the seed's independent measure), is recorded as ``<name>_raw`` and
logged every step as ``reward/<name>_raw`` (``logged_values``) beside the paid one; ``mode="independent"``
(``mode.py``) pays it instead.
"""

from __future__ import annotations

from typing import Any

import torch

from propel.rewards.triage.component import TriageReward, content
from propel.rewards.triage.mode import CONTENT_FIRST, column
from propel.tasks.triage.parse import Submission


class StyleReward(TriageReward):
    """A style component: subclasses measure ``style``; ``score`` gates it by content (``mode="content_first"``) or
    pays it as is (``mode="independent"``), and records both."""

    base: float = 0.0
    """Paid to every accepted answer, whatever its content."""
    mode: str = CONTENT_FIRST

    def style(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        raise NotImplementedError

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        style, details = self.style(answer, completion, gold)
        raw = self.base + (1.0 - self.base) * style
        gate = content(answer, gold).procedure if self.mode == CONTENT_FIRST else 1.0
        paid = self.base + (1.0 - self.base) * style * gate
        return paid, {**details, f"{self.name}_style": style, f"{self.name}_raw": raw}

    def logged_values(self) -> dict[str, torch.Tensor]:
        """``raw``: the ungated value of each sample of the last call (0 for a rejected answer)."""
        return {"raw": column(self.scored, f"{self.name}_raw")}
