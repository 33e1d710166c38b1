"""Training steps that take no optimizer step: counted, warned about, and stopped after too many in a row.

``global_step`` counts optimizer steps, so a trainer whose steps keep finding nothing to train on (no targets, every
group filtered, every rollout failed) would never reach ``max_steps``: the run would spin forever. The guard makes
each such step visible (a warning with the trainer's reason, two logged counters) and ends the run after
``limit`` in a row.
"""

from __future__ import annotations

from lightning.pytorch.utilities import rank_zero_warn

from propel.errors import PropelError


class UpdateGuard:
    """Counts steps without an optimizer step across one run (its counters travel in the checkpoint)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_a_row = 0
        """Training steps in a row (up to now) that took no optimizer step."""
        self.skipped = 0
        """Training steps of the whole run that took no optimizer step."""
        self._start, self._reason = 0, ""

    def start(self, global_step: int) -> None:
        self._start, self._reason = global_step, ""

    def note(self, reason: str) -> None:
        """Why this step takes no optimizer step (in the warning and the error)."""
        self._reason = reason

    def end(self, global_step: int) -> dict[str, float]:
        """Count the step; the counters to log. Raises ``PropelError`` after ``limit`` steps in a row."""
        updated = global_step > self._start
        self.in_a_row = 0 if updated else self.in_a_row + 1
        self.skipped += not updated
        metrics = {"train/steps_without_update": float(self.in_a_row), "train/skipped_steps": float(self.skipped)}
        if updated:
            return metrics
        reason = self._reason or "the training step returned without one"
        what = f"{self.in_a_row} training step(s) in a row took no optimizer step ({reason})"
        if self.in_a_row >= self.limit:
            raise PropelError(
                f"{what}: global_step stays at {global_step}, so max_steps would never be reached; stopping "
                f"after max_steps_without_update={self.limit}"
            )
        rank_zero_warn(f"{what}; global_step stays at {global_step} (the run stops after {self.limit} in a row)")
        return metrics

    def state(self) -> list[int]:
        return [self.in_a_row, self.skipped]

    def load(self, state: list[int]) -> None:
        self.in_a_row, self.skipped = (int(x) for x in state)
