"""Keep the run folder's ``last.ckpt`` at the last finished step: written when training stops (Ctrl-C, SIGTERM,
SLURM's signal) and when it ends, so that rerunning the same command resumes (``propel fit`` reads it by default).

``ModelCheckpoint`` saves every N steps, so a run stopped between two saves loses the steps since the last one, and
a run stopped before the first loses them all. On a stop this callback writes the state the last finished step left,
never the half-done step in flight: a stop usually lands in a step's rollouts, after the stream has advanced its
cursor and the sampler has drawn from the RNG. A step's end state is complete when the next step starts (every
callback and the module have run their end-of-step hooks; the stream has not moved yet), so that is when it is kept,
without its tensors; the loops' counters are kept where Lightning's own step checkpoints take them, at the end of the
step. The adapter and optimizer state written are the live ones, unchanged since then because no optimizer step has
run (checked on Lightning's optimizer-step counters). The resumed run then continues exactly as an uninterrupted one
would. What no stop-time checkpoint can hold is written nowhere and said so: a stop inside the optimizer update
itself (the weights half updated), or, under several processes, one between an update and the next step's start.

SLURM's early warning (``--signal=USR1@90``) stops the run the same way where Lightning's SLURM plugin does not take
it (its auto-requeue, when it runs, writes its own ``hpc_ckpt`` and requeues the job; the SIGTERM that follows is
then the stop). Without a ``ModelCheckpoint`` with ``save_last`` (checkpointing turned off) it does nothing.
"""

from __future__ import annotations

import copy
import os
import signal
import threading
from pathlib import Path

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint
from lightning.pytorch.trainer.states import TrainerFn
from lightning.pytorch.utilities import rank_zero_info

from propel.cli import stops
from propel.cli.resume import shown
from propel.durable import write_with

_TENSORS = ("state_dict", "optimizer_states")
"""Checkpoint entries that are read live at a stop (the rest is kept from the last finished step)."""


def in_optimizer_step(trainer: pl.Trainer) -> bool:
    """Whether an optimizer step has started and not finished (Lightning counts both): the weights may be half
    updated, and no stop may save them."""
    loop = trainer.fit_loop.epoch_loop
    if trainer.lightning_module.automatic_optimization:
        progress = loop.automatic_optimization.optim_progress.optimizer.step
    else:
        progress = loop.manual_optimization.optim_step_progress
    return progress.total.ready != progress.total.completed


class LastCheckpoint(Callback):
    """Writes ``last.ckpt`` of the trainer's ``ModelCheckpoint`` (the first with ``save_last``) when training stops
    on a signal and when it ends; what a stop wrote, or why it wrote nothing, is noted for the command's last line
    (``propel.cli.stops``). Durable and atomic (``propel.durable``); rank 0 writes.
    """

    def __init__(self) -> None:
        self.path: str | None = None
        """The file written (the ``ModelCheckpoint``'s ``dirpath/last.ckpt``); None: nothing to keep."""
        self._model_checkpoint: ModelCheckpoint | None = None
        self._start_step = 0
        self._loops: dict | None = None
        """The loops' state at the end of the latest step."""
        self._step_end: dict | None = None
        """The checkpoint as the last finished step left it, without its tensors."""
        self._step_end_at = -1
        self._state_keys: list[str] = []
        self._previous_usr1 = None

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        found = [c for c in trainer.checkpoint_callbacks if isinstance(c, ModelCheckpoint) and c.save_last]
        if stage != TrainerFn.FITTING or not found or not found[0].dirpath:
            self.path = None
            return
        self._model_checkpoint = mc = found[0]
        self.path = os.path.join(mc.dirpath, f"{mc.CHECKPOINT_NAME_LAST}{mc.FILE_EXTENSION}")

    def on_train_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.path is None:
            return
        self._start_step = trainer.global_step
        self._loops, self._step_end, self._step_end_at = None, None, -1
        # ModelCheckpoint writes last-v1.ckpt beside a last.ckpt it did not write itself (a run started over in its
        # folder): one file is this run's last checkpoint, and the default resume reads it.
        self._model_checkpoint.last_model_path = self.path
        usr1 = getattr(signal, "SIGUSR1", None)
        in_main = threading.current_thread() is threading.main_thread()
        if usr1 is not None and in_main and signal.getsignal(usr1) in (signal.SIG_DFL, None):
            self._previous_usr1 = signal.signal(usr1, stops.on_signal)  # Lightning's SLURM plugin does not take it

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if self.path is not None:
            self._loops = copy.deepcopy(trainer._checkpoint_connector._get_loops_state_dict())

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        if self.path is None or self._loops is None:  # no step has ended since the (re)start
            return
        checkpoint = trainer._checkpoint_connector.dump_checkpoint(weights_only=False)
        checkpoint["loops"] = self._loops
        self._state_keys = list(checkpoint["state_dict"])  # what the module keeps (LoRA only)
        self._step_end = copy.deepcopy({k: v for k, v in checkpoint.items() if k not in _TENSORS})
        self._step_end_at = trainer.global_step

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        if not stops.is_stop(exception) or self.path is None or trainer.state.fn != TrainerFn.FITTING:
            return
        step = trainer.global_step
        checkpoint, why = None, ""
        if in_optimizer_step(trainer):
            why = f"the stop came inside step {step + 1}'s optimizer update, with the weights half updated"
        elif self._step_end is not None and step == self._step_end_at:
            checkpoint = dict(self._step_end)
            live = trainer.strategy.lightning_module_state_dict()
            checkpoint["state_dict"] = {k: live[k] for k in self._state_keys}
            checkpoint["optimizer_states"] = [trainer.strategy.optimizer_state(o) for o in trainer.optimizers]
        elif step > max(self._step_end_at, self._start_step):
            if trainer.world_size == 1:  # step `step` has updated the weights, the next has not started: all is live
                checkpoint = trainer._checkpoint_connector.dump_checkpoint(weights_only=False)
            else:
                why = f"the stop came after step {step}'s update and before the next step, on several processes"
        else:
            why = "no training step finished" + (f" since the resume at step {step}" if step else "")
        if checkpoint is None:
            on_disk = Path(self.path).is_file()
            kept = f"; {shown(self.path)} is kept as it was" if on_disk else ""
            stops.note(f"nothing was written ({why}){kept}", resumable=on_disk)
            return
        if trainer.is_global_zero:
            self._write(checkpoint)
        stops.note(f"wrote {shown(self.path)} (step {checkpoint['global_step']})", resumable=True)

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if self.path is None:
            return
        checkpoint = trainer._checkpoint_connector.dump_checkpoint(weights_only=False)
        if trainer.is_global_zero:
            self._write(checkpoint)
            rank_zero_info(f"propel: wrote {shown(self.path)} (step {checkpoint['global_step']})")

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if self._previous_usr1 is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGUSR1, self._previous_usr1)
            self._previous_usr1 = None

    def _write(self, checkpoint: dict) -> None:
        mc = self._model_checkpoint
        state = checkpoint.get("callbacks", {}).get(mc.state_key)
        if isinstance(state, dict):  # the resumed ModelCheckpoint goes on writing this file, not last-v1.ckpt
            state["last_model_path"] = self.path
        write_with(self.path, lambda tmp: torch.save(checkpoint, tmp))
