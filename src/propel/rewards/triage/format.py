"""Format adherence, graduated: partial credit per valid field of the ``submit_resolution`` object."""

from __future__ import annotations

from typing import Any

from propel.domains.triage.parse import FIELDS, Submission
from propel.errors import ConfigError
from propel.rewards.triage.base import TriageReward


class TriageFormat(TriageReward):
    """Range [0, 1]. Pays ``object_credit`` for exactly one submission object (none or several: 0) and an equal share
    of the rest for each valid field: a resolution with at least one word, a non-empty list of non-empty citation
    ids, a confidence that is a number in [0, 1], a boolean escalate. Shortcuts earn nothing: ``""`` or ``"..."``
    as the resolution, ``[]`` as citations, ``"0.9"`` (a string) as confidence.

    Args:
        object_credit: the share paid for a single submission object (the four fields share the rest).
    """

    def __init__(self, name: str = "format", weight: float = 1.0, object_credit: float = 0.2) -> None:
        if not 0.0 <= object_credit <= 1.0:
            raise ConfigError(f"object_credit must be in [0, 1], got {object_credit}")
        self.name, self.weight, self.object_credit = name, weight, object_credit

    def score(self, answer: Submission, completion: str, gold: dict[str, Any]) -> tuple[float, dict[str, Any]]:
        valid = answer.valid_fields() if answer.found else dict.fromkeys(FIELDS, False)
        value = self.object_credit * (answer.count == 1) + (1 - self.object_credit) * sum(valid.values()) / len(valid)
        return value, {"reason": answer.reason}
