"""ProbeBank: many probe heads trained under one Lightning ``Trainer.fit``, each as if it had been fitted alone.

The sweep trains hundreds of tiny heads (the demo: 576). One ``Trainer.fit`` per head costs several times the
training itself in per-fit setup (``benchmarks/probe_fit_overhead.py``); here one fit trains them all: a Lightning
epoch is one epoch of every head still training, and a head leaves the bank when its own early stopping says so.
Each head's data, shuffling, dropout RNG, optimizer and stopping rule are its own (``HeadFit``), so its weights equal
those of a fit of its own (tested against that fit, bit for bit). Callbacks see each head as it finishes
(``ProbeBank.finished``), which is how the sweep writes a run's record the moment its head stops and a killed sweep
loses only heads in training.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import warnings
from collections.abc import Iterator, Sequence

from lightning.pytorch import Callback, LightningModule, Trainer
from torch import nn

from propel.probes.training import HeadFit


class ProbeBank(LightningModule):
    """Train the ``HeadFit``s of ``fits`` together: one training step is one epoch of every unfinished head.

    ``finished`` lists the indices of the heads that stopped in the current epoch (read it in a callback's
    ``on_train_epoch_end``); the fit ends when every head has stopped (each stops by ``max_epochs`` at the latest).
    """

    def __init__(self, fits: Sequence[HeadFit]):
        super().__init__()
        if not fits:
            raise ValueError("ProbeBank: give at least one head to train")
        self.fits = list(fits)
        self.heads = nn.ModuleList(f.module for f in self.fits)  # the bank's parameters, for Lightning's accounting
        self.automatic_optimization = False
        self.finished: list[int] = []
        self.epochs = max(f.loop.max_epochs for f in self.fits)

    def configure_optimizers(self):
        return [f.optimizer for f in self.fits]

    def train_dataloader(self):
        return [0]  # one tick per epoch: each head iterates over its own rows

    def training_step(self, batch, batch_idx) -> None:
        self.finished = [i for i, f in enumerate(self.fits) if not f.done and f.epoch(self.manual_backward)]
        if all(f.done for f in self.fits):
            self.trainer.should_stop = True

    def on_train_start(self) -> None:
        for f in self.fits:  # Lightning sets the whole bank to train mode; a head is in train mode only in its epoch
            f.module.eval()


class _Interrupted(Exception):
    """A stop signal's ``KeyboardInterrupt`` carried through Lightning's fit as an ordinary exception."""


@contextlib.contextmanager
def _interrupts_pass_through() -> Iterator[None]:
    """Keep Ctrl-C (and a SIGTERM handler that raises) a ``KeyboardInterrupt`` to the bank's caller: Lightning ends a
    fit interrupted that way with ``sys.exit(1)`` and ignores SIGINT from then on, which would end a script or a
    notebook instead of the sweep (a stopped sweep keeps its finished runs, and a rerun resumes them). Python
    handlers only, and only in the main thread; the caller's handlers are back in place afterwards."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def wrapped(signum, frame):
        try:
            previous[signum](signum, frame)
        except KeyboardInterrupt as stop:
            raise _Interrupted(stop) from None

    try:
        for signum, handler in previous.items():
            if callable(handler):
                signal.signal(signum, wrapped)
        yield
    except _Interrupted as carried:
        raise carried.args[0] from None
    finally:
        for signum, handler in previous.items():
            if callable(handler):
                signal.signal(signum, handler)


@contextlib.contextmanager
def _quiet_trainer() -> Iterator[None]:
    """Lightning's hardware banner and "max_epochs reached" notes, and its warnings about a one-tick loader without
    validation, are the bank's design: nothing a sweep's user can act on."""
    names = [f"lightning.{p}{sub}" for p in ("pytorch", "fabric") for sub in ("", ".utilities.rank_zero")]
    loggers = [logging.getLogger(n) for n in names]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*(num_workers|does not have many workers|log_every_n_steps).*")
            for category in (DeprecationWarning, FutureWarning):  # dependencies' own, nothing the user calls
                warnings.filterwarnings("ignore", category=category)
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


def fit_bank(fits: Sequence[HeadFit], callbacks: Sequence[Callback] = ()) -> ProbeBank:
    """Train every head of ``fits`` under one ``Trainer.fit`` on the CPU; returns the bank (each head's ``module``
    holds its best epoch's weights, ``epochs`` the epochs it ran)."""
    bank = ProbeBank(fits)
    with _interrupts_pass_through(), _quiet_trainer():
        trainer = Trainer(
            max_epochs=bank.epochs,
            callbacks=list(callbacks),
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            limit_val_batches=0,
        )
        trainer.fit(bank)
    return bank
