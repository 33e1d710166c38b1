"""Where a module is inside its current step or batch (the phase, how far along it is, the seconds each phase took),
written by the module and read by a progress display: ``LoRAPolicyModule`` (rollouts, grading, update) and
``LabelingModule`` (generating, checking, solving) declare one as ``self.phases``."""

from __future__ import annotations

import time


class Phases:
    """Where a module is inside its current step or batch: the phase, how far along it is, the seconds each phase
    took in this step, and the run's counts (tasks done, valid ones) with their totals. The module writes it; a
    display (on another thread too) only reads it."""

    def __init__(self) -> None:
        self.name: str | None = None
        """The running phase (None between steps)."""
        self.done = 0
        self.total: int | None = None
        self.unit = ""
        self.since = time.monotonic()
        self.seconds: dict[str, float] = {}
        """Seconds of each finished phase of this step (``split`` adds the running one)."""
        self.counts: dict[str, int] = {}
        self.totals: dict[str, int] = {}

    def reset(self) -> None:
        """A new step or batch: no phase, no seconds (counts are the run's and stay)."""
        self.name, self.seconds = None, {}

    def start(self, name: str, total: int | None = None, unit: str = "") -> None:
        """Enter phase ``name`` with ``total`` units of work ahead; entering the running phase again restarts its
        count, not its clock (an update over several PPO epochs is one phase)."""
        now = time.monotonic()
        if name != self.name:
            self._close(now)
            self.name, self.since = name, now
        self.done, self.total, self.unit = 0, total, unit

    def advance(self, n: int = 1) -> None:
        self.done += n

    def stop(self) -> None:
        """The step's work is done (its seconds are final)."""
        self._close(time.monotonic())
        self.name = None

    def count(self, **counts: int) -> None:
        """Add to the run's counts (``tasks=16, valid=5``)."""
        for key, n in counts.items():
            self.counts[key] = self.counts.get(key, 0) + n

    def split(self) -> dict[str, float]:
        """Seconds of each phase in this step, the running one's so far included."""
        out = dict(self.seconds)
        if self.name is not None:
            out[self.name] = out.get(self.name, 0.0) + time.monotonic() - self.since
        return out

    def describe(self) -> str:
        """``rollouts (32 samples) 0:41``, ``update 3/8 micro-batches 0:05``; '' between steps."""
        if self.name is None:
            return ""
        if self.total is None:
            amount = ""
        elif self.done:
            amount = f" {self.done}/{self.total} {self.unit}".rstrip()
        else:
            amount = f" ({self.total} {self.unit})".replace(" )", ")")
        return f"{self.name}{amount} {clock(time.monotonic() - self.since)}"

    def describe_counts(self) -> str:
        """``tasks 48/128, valid 17``; '' without counts."""
        totals = self.totals
        return ", ".join(f"{k} {n}/{totals[k]}" if k in totals else f"{k} {n}" for k, n in self.counts.items())

    def _close(self, now: float) -> None:
        if self.name is not None:
            self.seconds[self.name] = self.seconds.get(self.name, 0.0) + now - self.since


def clock(seconds: float) -> str:
    """``0:41``, ``12:03``, ``1:02:03``."""
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"
