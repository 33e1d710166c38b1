"""Fast in-process training of one ``ProbeClassifier`` on in-memory tensors (the sweep's inner loop).

Same head, loss, optimizer and metrics as ``ProbeModule`` under a Lightning ``fit``; what it drops is the Trainer's
per-run setup cost, which dominates when thousands of tiny heads are trained. Early stopping mirrors Lightning's
``EarlyStopping`` (stop after ``patience`` epochs without strict improvement) and the best epoch's weights are
restored.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from torch import Tensor

from propel.metrics.classification import balanced_accuracy
from propel.probes.classifier import ProbeClassifier


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


def _monitor(module: ProbeClassifier, logits: Tensor, y: Tensor, monitor: str) -> float:
    if monitor == "loss":
        return -float(module.loss(logits, y))
    threshold = module.threshold
    return balanced_accuracy((torch.sigmoid(logits) >= threshold).long(), y.long())


def fit_in_memory(
    module: ProbeClassifier,
    x_train: Tensor,
    y_train: Tensor,
    x_val: Tensor,
    y_val: Tensor,
    *,
    seed: int = 0,
    loop: LoopSpec | None = None,
) -> int:
    """Train ``module`` in place (best validation epoch's weights restored); returns the number of epochs run."""
    s = loop or LoopSpec()
    if s.monitor not in ("balanced_accuracy", "loss"):
        raise ValueError(f"monitor: choose balanced_accuracy or loss, got {s.monitor!r}")
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    optimizer = module.configure_optimizers()
    n = len(y_train)
    best, best_state, wait, epoch = float("-inf"), None, 0, 0
    for epoch in range(1, s.max_epochs + 1):  # noqa: B007 (epoch is returned)
        module.train()
        for idx in torch.randperm(n, generator=gen).split(s.batch_size):
            loss = module.loss(module(x_train[idx]), y_train[idx])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        module.eval()
        with torch.no_grad():
            score = _monitor(module, module(x_val), y_val, s.monitor)
        if score > best:
            best, best_state, wait = score, copy.deepcopy(module.head.state_dict()), 0
        else:
            wait += 1
            if wait >= s.patience:
                break
    if best_state is not None:
        module.head.load_state_dict(best_state)
    module.eval()
    return epoch
