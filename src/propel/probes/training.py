"""One probe head's training state: its rows, shuffling, dropout RNG, optimizer and early stopping (plain torch).

A ``HeadFit`` advances one epoch at a time, so ``propel.probes.bank.ProbeBank`` can train many of them under one
Lightning ``fit``. Each head keeps its own random streams (a shuffling generator, and the global RNG state its
dropout draws from, saved and restored around its epoch), so its weights do not depend on which other heads share the
bank or in what order they run. Early stopping is Lightning's ``EarlyStopping`` rule (stop after ``patience`` epochs
without strict improvement), and the best epoch's weights are restored when the head stops.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import Tensor

from propel.metrics.classification import balanced_accuracy
from propel.probes.classifier import ProbeClassifier

MONITORS = ("balanced_accuracy", "loss")


@dataclass
class LoopSpec:
    """Training-loop knobs (defaults: the PROPEL paper's probe recipe, App. 14)."""

    max_epochs: int = 50
    """Upper bound on epochs."""
    patience: int = 5
    """Epochs without improvement of the monitored validation metric before stopping."""
    batch_size: int = 64
    """Training batch size."""
    monitor: str = "balanced_accuracy"
    """``balanced_accuracy`` (higher is better) or ``loss`` (lower is better), on the validation split."""

    def __post_init__(self) -> None:
        if self.monitor not in MONITORS:
            raise ValueError(f"monitor: choose balanced_accuracy or loss, got {self.monitor!r}")
        if self.max_epochs < 1 or self.patience < 1 or self.batch_size < 1:
            raise ValueError(
                f"loop: max_epochs, patience and batch_size must be >= 1, got {self.max_epochs}, {self.patience}, "
                f"{self.batch_size}"
            )


def _rng_state(seed: int) -> Tensor:
    """The CPU RNG state ``torch.manual_seed(seed)`` would set, without touching the global one."""
    return torch.Generator().manual_seed(seed).get_state()


class HeadFit:
    """One head trained on rows ``train`` of ``x`` and stopped early on rows ``val``.

    Args:
        module: the head with its objective (initialised by the caller: the init is the caller's seed's).
        x: features ``[N, D]``, shared with the other heads of a bank (rows are gathered per batch, not copied).
        y: labels ``[N]``.
        train: row indices the head trains on (shuffled each epoch by a generator seeded with ``seed``).
        val: row indices the early-stopping metric is measured on.
        seed: the head's shuffling and dropout seed.
        loop: epochs, patience, batch size, monitored metric.
    """

    def __init__(
        self, module: ProbeClassifier, x: Tensor, y: Tensor, train: Tensor, val: Tensor, *, seed: int, loop: LoopSpec
    ):
        self.module, self.x, self.y, self.loop = module, x, y, loop
        self.train, self.val = torch.as_tensor(train, dtype=torch.long), torch.as_tensor(val, dtype=torch.long)
        self.generator = torch.Generator().manual_seed(seed)
        self.rng_state = _rng_state(seed)
        self.optimizer = module.configure_optimizers()
        self.epochs = 0
        self.seconds = 0.0
        """Time spent in this head's own epochs (its share of a bank's fit)."""
        self.done = False
        self._best, self._best_state, self._wait = float("-inf"), None, 0

    def score(self) -> float:
        """The monitored validation metric, higher is better."""
        logits, y = self.module(self.x[self.val]), self.y[self.val]
        if self.loop.monitor == "loss":
            return -float(self.module.loss(logits, y))
        return balanced_accuracy((torch.sigmoid(logits) >= self.module.threshold).long(), y.long())

    def epoch(self, backward: Callable[[Tensor], None] = Tensor.backward) -> bool:
        """Train one epoch, measure the validation metric, and stop when it has not improved for ``patience``
        epochs or ``max_epochs`` are done (the best epoch's weights restored); returns whether the head is done."""
        if self.done:
            return True
        start, outer = time.perf_counter(), torch.get_rng_state()
        torch.set_rng_state(self.rng_state)
        try:
            self.epochs += 1
            self.module.train()
            for idx in torch.randperm(len(self.train), generator=self.generator).split(self.loop.batch_size):
                rows = self.train[idx]
                loss = self.module.loss(self.module(self.x[rows]), self.y[rows])
                self.optimizer.zero_grad(set_to_none=True)
                backward(loss)
                self.optimizer.step()
            self.module.eval()
            with torch.no_grad():
                score = self.score()
        finally:
            self.rng_state = torch.get_rng_state()
            torch.set_rng_state(outer)
            self.seconds += time.perf_counter() - start
        if score > self._best:
            self._best, self._best_state, self._wait = score, copy.deepcopy(self.module.head.state_dict()), 0
        else:
            self._wait += 1
        if self._wait >= self.loop.patience or self.epochs >= self.loop.max_epochs:
            self.finish()
        return self.done

    def finish(self) -> None:
        """Stop: restore the best validation epoch's weights and leave the head in eval mode."""
        if self._best_state is not None:
            self.module.head.load_state_dict(self._best_state)
        self._best_state = None
        self.module.eval()
        self.done = True
