"""Format adherence: a credit for one well-formed submission, and a content-gated share per valid field."""

from __future__ import annotations

from typing import Any

from propel.errors import ConfigError
from propel.rewards.triage.gate import StyleReward
from propel.rewards.triage.mode import CONTENT_FIRST, check_mode
from propel.tasks.triage.parse import Submission


class TriageFormat(StyleReward):
    """Range [0, 1]: ``object_credit + (1 - object_credit) * fields * procedure``. A rejected answer (no submission,
    two, a duplicate or extra key) scores 0. ``object_credit`` is paid for the one accepted submission; ``fields`` is
    the share of valid fields (a resolution with at least one word, a non-empty list of non-empty ids, a confidence
    that is a number in [0, 1], a boolean escalate) and is gated by the resolution's content (``gate.py``): well-formed
    fields around a wrong fix earn nothing more than the parse. Shortcuts are invalid fields: ``""`` or ``"..."`` as
    the resolution, ``[]`` as citations, ``"0.9"`` (a string) as confidence; each is named in ``field_errors``.

    Args:
        object_credit: the share paid for a single accepted submission (the four fields share the rest).
        mode: ``content_first`` (the fields gated by content) or ``independent`` (``object_credit + (1 -
            object_credit) * fields``, the seed's; ``mode.py``). Both values are logged (``format``, ``format_raw``).
    """

    def __init__(
        self, name: str = "format", weight: float = 1.0, object_credit: float = 0.2, mode: str = CONTENT_FIRST
    ) -> None:
        if not 0.0 <= object_credit <= 1.0:
            raise ConfigError(f"object_credit must be in [0, 1], got {object_credit}")
        self.name, self.weight, self.base = name, weight, object_credit
        self.mode = check_mode(mode, "TriageFormat")

    @property
    def object_credit(self) -> float:
        return self.base

    def style(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        valid = answer.valid_fields()
        return sum(valid.values()) / len(valid), {"field_errors": answer.field_errors}
