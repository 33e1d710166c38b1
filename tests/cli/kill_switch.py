"""A callback that SIGKILLs its own process in the middle of a training step (after the rollouts and the backward
pass, before the optimizer step): how a preempted or OOM-killed job ends, with no chance to save anything."""

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
