"""Callbacks that end their own process in the middle of a training step: ``KillMidStep`` SIGKILLs it (after the
rollouts and the backward pass, before the optimizer step), how a preempted or OOM-killed job ends with no chance to
save anything; ``SignalMidStep`` sends it a stop signal (Ctrl-C's SIGINT, SIGTERM), which it may handle.
``default_sigint`` is the ``preexec_fn`` that gives a child Ctrl-C's default action, whatever the suite was started
from."""

from __future__ import annotations

import os
import signal

from lightning.pytorch.callbacks import Callback


class KillMidStep(Callback):
    def __init__(self, at_step: int):
        self.at_step = at_step

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        if trainer.global_step == self.at_step:
            os.kill(os.getpid(), signal.SIGKILL)


class SignalMidStep(Callback):
    """Sends ``signal`` to its own process in the middle of the step after ``at_step`` (rollouts sampled, the stream's
    cursor and RNG advanced, no optimizer step yet), as a Ctrl-C or a ``kill`` landing there would; once only (the
    ``marker`` file records it), so the same command reruns without it."""

    def __init__(self, signal: str, at_step: int, marker: str):
        self.signum, self.at_step, self.marker = signal, at_step, marker

    def on_before_backward(self, trainer, pl_module, loss) -> None:
        if trainer.global_step == self.at_step and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), getattr(signal, self.signum))


class SignalAfterBatch(Callback):
    """Sends ``signal`` to its own process once test batch ``after_batch`` has ended (its rows on disk), as a Ctrl-C
    landing between two batches would; once only (``marker``), so the same command reruns without it. A stop sent
    from outside races a fast run to its end; this one lands mid-run on any machine."""

    def __init__(self, signal: str, after_batch: int, marker: str):
        self.signum, self.after_batch, self.marker = signal, after_batch, marker

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if batch_idx == self.after_batch and not os.path.exists(self.marker):
            open(self.marker, "w").close()
            os.kill(os.getpid(), getattr(signal, self.signum))


def default_sigint() -> None:
    """In a child, before it runs: Ctrl-C's default action. A suite started as a background job of a non-interactive
    shell (``make test &``, ``nohup``) hands its children SIGINT ignored, and propel leaves an ignored SIGINT ignored
    (``tests/cli/test_stop_resume.py``), so a SIGINT the child sends itself would do nothing."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
