"""The plain PyTorch loop that defines how one probe head trains: the reference a ``ProbeBank``'s heads are held to,
bit for bit (``tests/probes/test_probe_bank.py``), and the no-Lightning baseline ``benchmarks/probe_fit_overhead.py``
times the bank against."""

from __future__ import annotations

import copy

import torch

from propel.metrics.classification import balanced_accuracy
from propel.probes.classifier import ProbeClassifier
from propel.probes.training import LoopSpec


def reference_fit(module: ProbeClassifier, x, y, train, val, seed: int, loop: LoopSpec) -> int:
    """The definition a head's training must meet: a plain PyTorch loop (AdamW, shuffled batches from a generator
    seeded with ``seed``, dropout from the global RNG seeded with ``seed``) with Lightning's EarlyStopping rule (stop
    after ``patience`` epochs without strict improvement), the best epoch's weights restored."""
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    opt = module.configure_optimizers()
    x_train, y_train, x_val, y_val = x[train], y[train], x[val], y[val]
    best, best_state, wait, epoch = float("-inf"), None, 0, 0
    for epoch in range(1, loop.max_epochs + 1):  # noqa: B007
        module.train()
        for idx in torch.randperm(len(train), generator=gen).split(loop.batch_size):
            loss = module.loss(module(x_train[idx]), y_train[idx])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        module.eval()
        with torch.no_grad():
            logits = module(x_val)
            if loop.monitor == "loss":
                score = -float(module.loss(logits, y_val))
            else:
                score = balanced_accuracy((torch.sigmoid(logits) >= module.threshold).long(), y_val.long())
        if score > best:
            best, best_state, wait = score, copy.deepcopy(module.head.state_dict()), 0
        else:
            wait += 1
            if wait >= loop.patience:
                break
    module.head.load_state_dict(best_state)
    return epoch
