"""Stopping a command on a signal, and what the stop left on disk.

SIGINT (Ctrl-C), SIGTERM (``kill``, SLURM, container runtimes) and SLURM's early warning (SIGUSR1, where Lightning's
SLURM plugin does not take it: ``propel.callbacks.last_checkpoint``) all raise ``Stopped``, a ``KeyboardInterrupt``:
Lightning and every ``finally`` shut down as on Ctrl-C. Whatever saves on the way out ``note``s what it wrote (or
that it wrote nothing, and why), so the line the command ends with says what is on disk rather than guessing.
Imports nothing heavy.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass


class Stopped(KeyboardInterrupt):
    """Raised in the main thread by a stop signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


@dataclass(frozen=True)
class Note:
    """What one writer left on disk when the command stopped."""

    text: str
    """``"wrote runs/x/checkpoints/last.ckpt (step 1)"``, ``"nothing was written: no training step finished"``."""
    resumable: bool
    """Whether rerunning the same command continues from what is on disk."""


received: list[int] = []
"""The stop signals this command received, in order."""
notes: list[Note] = []
"""What the writers noted on the way out."""


def on_signal(signum: int, frame) -> None:
    """The handler of every stop signal: the first raises ``Stopped``; later ones are recorded only, so that a second
    Ctrl-C or SIGTERM during the shutdown cannot cut the saving short."""
    received.append(signum)
    if len(received) == 1:
        raise Stopped(signum)


def is_stop(exception: BaseException) -> bool:
    """Whether a run ended on a stop signal: ``Stopped`` (or a plain Ctrl-C) under ``propel``, or the
    ``SIGTERMException`` Lightning's own SIGTERM handler raises at a step's end, the handler a script that calls
    ``Trainer.fit`` itself has (an experiment's runs). What saves on a stop asks this."""
    from lightning.pytorch.utilities.exceptions import SIGTERMException  # here: this module imports nothing heavy

    return isinstance(exception, (KeyboardInterrupt, SIGTERMException))


def note(text: str, resumable: bool) -> None:
    """Record what a writer left on disk, for the command's last line."""
    notes.append(Note(text, resumable))


def reset() -> None:
    received.clear()
    notes.clear()


def exit_code(signum: int) -> int:
    """The shell's convention for a process ended by signal ``signum`` (130 for SIGINT, 143 for SIGTERM)."""
    return 128 + int(signum)


def summary(signum: int, command: str) -> str:
    """The command's last line after a stop: the signal, what was written and what rerunning ``command`` does."""
    name = signal.Signals(signum).name
    if not notes:
        return f"propel: stopped by {name}; nothing was saved on the way out"
    written = "; ".join(n.text for n in notes)
    rerun = "resume" if any(n.resumable for n in notes) else "start over"
    return f"propel: stopped by {name}; {written}: rerun `{command}` to {rerun}"
