"""The data-parallel reductions a trainer's decisions are taken on, so every rank takes the same one.

A step under DDP must look the same on every rank: whether to step, what to log, which rows count. Each method is a
collective (every rank must call it, in the same order); in one process each is the identity, so a trainer reads the
same with or without a strategy.
"""

from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
import torch


class Ranks:
    """The collectives of one LightningModule's trainer."""

    def __init__(self, module: pl.LightningModule) -> None:
        self.module = module

    @property
    def size(self) -> int:
        """Processes training together under the trainer's strategy (1 without a trainer)."""
        trainer = self.module._trainer
        return trainer.world_size if trainer is not None else 1

    def sum(self, value: float) -> float:
        """``value`` summed over the ranks."""
        if self.size == 1:
            return float(value)
        module = self.module
        total = module.trainer.strategy.reduce(torch.tensor(float(value), device=module.device), reduce_op="sum")
        return float(total)

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's picklable ``obj``, in rank order (``[obj]`` in one process)."""
        if self.size == 1:
            return [obj]
        out: list[Any] = [None] * self.size
        torch.distributed.all_gather_object(out, obj)
        return out

    def prefix(self, n: int, limit: int) -> int:
        """How many of this rank's ``n`` items are among the first ``limit`` of the global batch, whose items are
        the ranks' in rank order (as one process lists them)."""
        counts = self.gather_objects(int(n))
        return max(0, min(int(n), limit - sum(counts[: self.module.global_rank])))

    def gather(self, values: torch.Tensor) -> torch.Tensor:
        """Every rank's ``values`` (same shape on each) concatenated in rank order along dim 0: reward statistics
        logged from it are the global batch's, as one process would log them."""
        if self.size == 1:
            return values
        gathered = self.module.all_gather(values.to(self.module.device))
        return gathered.reshape(-1, *values.shape[1:]).cpu()
