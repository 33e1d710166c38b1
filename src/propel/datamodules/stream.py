"""The resumable stream of task batches that online RL datamodules share.

Each training step takes one ``ContextBatch``: ``contexts_per_step`` contexts from a task source (anything with
``contexts(n, seed)``: a ``Domain``, ``ShellTasks``), drawn with a seed derived from (``seed``, batch index) so the
stream is reproducible. The state holds the next batch index and the global torch RNG (which HF sampling and LoRA
dropout draw from), captured at the step boundary; a resumed run therefore samples exactly what an uninterrupted
run would have.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lightning.pytorch as pl
import torch

from propel.errors import ConfigError
from propel.rollouts.steps import ContextBatch


class _ContextStream:
    def __init__(self, datamodule: ContextStreamDataModule) -> None:
        self.dm = datamodule

    def __iter__(self) -> Iterator[ContextBatch]:
        index = self.dm.next_index
        while True:
            yield self.dm.batch_at(index)
            index += 1


class ContextStreamDataModule(pl.LightningDataModule):
    """An unbounded, resumable stream of context batches from ``tasks`` (subclasses add how a batch is rolled out).

    Args:
        tasks: the task source; its ``contexts(n, seed)`` must be deterministic in the seed (no global RNG).
        contexts_per_step: contexts per step (each gets ``group_size`` rollouts).
        seed: stream seed; batch ``i`` uses ``seed * 1_000_003 + i``.
    """

    def __init__(self, tasks, contexts_per_step: int = 4, seed: int = 0) -> None:
        super().__init__()
        if not callable(getattr(tasks, "contexts", None)):
            raise TypeError(f"the task source needs a contexts(n, seed) method, got {type(tasks).__name__}")
        if contexts_per_step < 1:
            raise ConfigError(f"contexts_per_step must be >= 1, got {contexts_per_step}")
        self.tasks, self.contexts_per_step, self.seed = tasks, contexts_per_step, seed
        self.next_index = 0
        self._pending_rng: torch.Tensor | None = None

    def batch_at(self, index: int) -> ContextBatch:
        contexts = self.tasks.contexts(self.contexts_per_step, self.seed * 1_000_003 + index)
        if len(contexts) != self.contexts_per_step:
            raise ValueError(f"contexts() returned {len(contexts)} contexts, expected {self.contexts_per_step}")
        return ContextBatch(index=index, contexts=contexts)

    def train_dataloader(self) -> _ContextStream:
        return _ContextStream(self)

    def on_before_rollout(self, batch: ContextBatch) -> None:
        """Called by the trainer as a step starts: marks the batch consumed and, after a resume, restores the RNG.

        (The loop prefetches batches, so the cursor cannot be advanced by the iterator itself.)
        """
        self.next_index = batch.index + 1
        if self._pending_rng is not None:
            torch.set_rng_state(self._pending_rng)
            self._pending_rng = None

    def state_dict(self) -> dict[str, Any]:
        return {"next_index": self.next_index, "torch_rng": torch.get_rng_state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.next_index = int(state_dict["next_index"])
        self._pending_rng = state_dict.get("torch_rng")
