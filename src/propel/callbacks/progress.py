"""Progress a person can follow: which step of ``max_steps`` an online RL run is at and which phase of the step is
running (rollouts, grading, update), or how many tasks a labeling or evaluation run has done; in a terminal as a
Rich bar, and when stdout is not a terminal (a log file, nohup, SLURM) as plain lines: one per step with the reward,
each reward component's mean and where the seconds went, one per labeling batch, and one every ``every_n_seconds``
while a long step or batch is still running.

Lightning's own bar counts epochs and the batches of one: an RL run over a stream of steps read ``Epoch 0/-2`` and
``0/3``, moved only when a batch ended (several minutes), and printed nothing at all without a terminal.

A module says where it is through its ``phases`` (a ``Phases``: ``LoRAPolicyModule`` and ``LabelingModule`` declare
one); other modules get the steps or batches alone. ``propel`` adds this callback to every run whose config names
no progress bar of its own; ``trainer.enable_progress_bar: false`` silences it.
"""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks.progress import ProgressBar
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Column
from rich.text import Text

from propel.lit_modules.phases import Phases, clock

REWARD = "train/reward/mean"
"""The logged mean reward of a step (``RewardBreakdown.stats`` under ``train/``)."""
LOSS = "train/loss"


def _seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 600 else clock(value)


class StepProgress(ProgressBar):
    """Steps of ``max_steps`` (fit) or batches (predict, test, validate), with the module's phase and counts.

    Args:
        every_n_seconds: without a terminal, a line this often while a step or batch runs on (0: none).
        plain: plain lines (True) or a Rich bar (False); None: plain when stdout is not a terminal.
    """

    def __init__(self, every_n_seconds: float = 30.0, plain: bool | None = None) -> None:
        super().__init__()
        self.every_n_seconds = every_n_seconds
        self.plain = plain
        self._enabled = True
        self._stage: str | None = None
        self._phases: Phases | None = None
        self._total: int | None = None
        self._done = 0
        self._unit = "step"
        self._run_start = self._unit_start = self._last_line = 0.0
        self._bar: Any = None
        self._task: Any = None
        self._beat: threading.Thread | None = None
        self._halt = threading.Event()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------------ ProgressBar
    @property
    def is_enabled(self) -> bool:
        return self._enabled

    @property
    def is_disabled(self) -> bool:
        return not self._enabled

    def disable(self) -> None:
        self._enabled = False

    def enable(self) -> None:
        self._enabled = True

    def print(self, *args: Any, **kwargs: Any) -> None:
        if self._bar is not None:
            self._bar.console.print(*args, **kwargs)
        else:
            kwargs.setdefault("flush", True)
            print(*args, **kwargs)

    # ---------------------------------------------------------------------------------------------- fit
    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        steps = trainer.max_steps if trainer.max_steps and trainer.max_steps > 0 else None
        self._begin("fit", pl_module, steps, trainer.global_step, "step")
        if self._plain():
            to = f" to step {steps}" if steps else ""
            self._line(f"fit: from step {trainer.global_step}{to}, a line per step")

    def on_train_batch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule, batch: Any, idx: int) -> None:
        self._unit_start = time.monotonic()

    def on_train_batch_end(self, trainer: pl.Trainer, pl_module, outputs: Any, batch: Any, idx: int) -> None:
        if self._stage != "fit":
            return
        self._done = trainer.global_step
        if self._plain():
            self._line(self._step_line(trainer))
        elif self._bar is not None:
            self._bar.update(self._task, completed=self._done, status=self._reward_text(trainer))

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._end(f"fit: finished at step {trainer.global_step}")

    # ------------------------------------------------------------------------------- predict / test / validate
    def on_predict_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._begin("predict", pl_module, _batches(trainer.num_predict_batches), 0, "batch")

    def on_test_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._begin("test", pl_module, _batches(trainer.num_test_batches), 0, "batch")

    def on_validation_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.state.fn == "validate" and not trainer.sanity_checking:
            self._begin("validate", pl_module, _batches(trainer.num_val_batches), 0, "batch")

    def on_predict_batch_start(self, trainer, pl_module, batch: Any, idx: int, dataloader_idx: int = 0) -> None:
        self._unit_start = time.monotonic()

    on_test_batch_start = on_validation_batch_start = on_predict_batch_start

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, idx: int, dataloader_idx: int = 0) -> None:
        if self._stage not in ("predict", "test", "validate"):
            return
        self._done += 1
        if self._plain():
            self._line(self._batch_line())
        elif self._bar is not None:
            counts = self._phases.describe_counts() if self._phases is not None else ""
            self._bar.update(self._task, completed=self._done, status=counts)

    on_test_batch_end = on_validation_batch_end = on_predict_batch_end

    def on_predict_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._end(f"{self._stage}: finished {self._summary()}")

    on_test_end = on_predict_end

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self._stage == "validate":
            self.on_predict_end(trainer, pl_module)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._end(None)

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._end(None)

    # ------------------------------------------------------------------------------------------ display
    def _plain(self) -> bool:
        return self.plain if self.plain is not None else not sys.stdout.isatty()

    def _begin(self, stage: str, pl_module, total: int | None, done: int, unit: str) -> None:
        if not self._enabled:
            return
        self._end(None)
        phases = getattr(pl_module, "phases", None)
        self._stage, self._phases = stage, phases if isinstance(phases, Phases) else None
        self._total, self._done, self._unit = total, done, unit
        self._run_start = self._unit_start = self._last_line = time.monotonic()
        if self._plain():
            if self.every_n_seconds > 0:
                self._halt.clear()
                self._beat = threading.Thread(target=self._heartbeat, name="propel-progress", daemon=True)
                self._beat.start()
            return
        self._bar = Progress(
            TextColumn(f"[bold]{stage}[/] {unit}"),
            MofNCompleteColumn(),
            BarColumn(bar_width=30),
            TimeElapsedColumn(),
            _Phase(self),
            TextColumn("{task.fields[status]}", table_column=Column(no_wrap=True)),
            refresh_per_second=2,
        )
        self._task = self._bar.add_task(stage, total=total, completed=done, status="")
        self._bar.start()

    def _end(self, last: str | None) -> None:
        if self._stage is None:
            return
        self._halt.set()
        if self._beat is not None:
            self._beat.join(timeout=5)
            self._beat = None
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
        elif last is not None:
            self._line(f"{last} in {clock(time.monotonic() - self._run_start)}")
        self._stage = None

    def _line(self, text: str) -> None:
        with self._lock:
            print(text, flush=True)
            self._last_line = time.monotonic()

    def _heartbeat(self) -> None:
        while not self._halt.wait(min(self.every_n_seconds, 1.0)):
            if time.monotonic() - self._last_line >= self.every_n_seconds and self._stage is not None:
                self._line(self._running_line())

    def _of(self, n: int) -> str:
        return f"{n}/{self._total}" if self._total else str(n)

    def _running_line(self) -> str:
        """The heartbeat: the step or batch in flight, its phase and how long it has run."""
        phase = self._phases.describe() if self._phases is not None else ""
        into = clock(time.monotonic() - self._unit_start)
        return f"{self._stage}: {self._unit} {self._of(self._done + 1)} running {into}" + (
            f": {phase}" if phase else ""
        )

    def _reward_text(self, trainer: pl.Trainer) -> str:
        """``reward 0.421 (probe 0.398, format 0.023)  loss 0.012``, from the step's logged metrics."""
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if getattr(v, "numel", lambda: 1)() == 1}
        parts = []
        if REWARD in metrics:
            components = [
                f"{key[len('train/reward/') : -len('/mean')]} {value:.3f}"
                for key, value in metrics.items()
                if key.startswith("train/reward/") and key.endswith("/mean") and key != REWARD
            ]
            parts.append(f"reward {metrics[REWARD]:.3f}" + (f" ({', '.join(components)})" if components else ""))
        if LOSS in metrics:
            parts.append(f"loss {metrics[LOSS]:.4g}")
        return "  ".join(parts)

    def _step_line(self, trainer: pl.Trainer) -> str:
        """One step: ``step 3/200  reward 0.421 (probe 0.398)  loss 0.012  41.2 s (rollouts 30.1 s, ...)``."""
        took = _seconds(time.monotonic() - self._unit_start)
        phases = self._phases.split() if self._phases is not None else {}
        spent = f" ({', '.join(f'{name} {_seconds(s)}' for name, s in phases.items())})" if phases else ""
        reward = self._reward_text(trainer)
        return f"step {self._of(trainer.global_step)}  " + (f"{reward}  " if reward else "") + took + spent

    def _summary(self) -> str:
        counts = self._phases.describe_counts() if self._phases is not None else ""
        return f"{self._unit} {self._of(self._done)}" + (f", {counts}" if counts else "")

    def _batch_line(self) -> str:
        """One batch: ``predict: batch 3/8, tasks 48/128, valid 17, 3:02 elapsed, ~5:04 left``."""
        elapsed = time.monotonic() - self._run_start
        left = ""
        if self._total and self._done:
            left = f", ~{clock(elapsed / self._done * (self._total - self._done))} left"
        return f"{self._stage}: {self._summary()}, {clock(elapsed)} elapsed{left}"


def _batches(counts: Any) -> int | None:
    """Lightning's batch count of a loop (a number or one per dataloader); None when it is not finite."""
    total = sum(counts) if isinstance(counts, list | tuple) else counts
    return int(total) if total is not None and total != float("inf") else None


class _Phase(ProgressColumn):
    """The module's phase and how long it has run (``rollouts (32 samples) 0:41``), live in the Rich bar."""

    def __init__(self, progress: StepProgress) -> None:
        super().__init__(table_column=Column(no_wrap=True))
        self.progress = progress

    def render(self, task) -> Text:
        phases = self.progress._phases
        return Text(phases.describe() if phases is not None else "", style="cyan")
