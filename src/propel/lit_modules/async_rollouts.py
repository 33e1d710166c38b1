"""Asynchronous rollouts: the next batches sampled on a worker thread while this one trains, never more than
``max_staleness`` optimizer steps behind the weights that train on them.

The worker syncs the engine to the newest weights before each batch (under the trainer's weight lock, which the
optimizer step also holds, so a batch never reads half-updated weights) and records the optimizer step it sampled
with; the trainer's loss corrects for the difference (truncated importance weights).
"""

from __future__ import annotations

import threading
from typing import Any

from propel.errors import ConfigError
from propel.rollouts.prefetch import Prefetched, RolloutPrefetcher
from propel.rollouts.steps import ContextBatch


class AsyncRollouts:
    """The worker of one trainer (started on its first batch)."""

    def __init__(self, module: Any, max_staleness: int) -> None:
        """``module``: the ``LoRAPolicyModule`` it samples for (its engine, its datamodule, its weights)."""
        self.module, self.max_staleness = module, max_staleness
        self.lock = threading.Lock()
        """Held by the optimizer step and by the worker's engine sync."""
        self._prefetcher: RolloutPrefetcher | None = None

    def take(self, batch: ContextBatch) -> Prefetched:
        """Batch ``batch.index``'s rollouts (sampled ahead, or now), with the weights' version and the wait."""
        if self._prefetcher is None:
            self._prefetcher = RolloutPrefetcher(self._sample, ahead=self.batches_ahead())
        return self._prefetcher.take(batch.index)

    def batches_ahead(self) -> int:
        """How many batches the worker may sample ahead so that no rollout exceeds ``max_staleness``."""
        module = self.module
        if module.engine_is_policy():
            raise ConfigError(
                "async_rollouts needs an engine that is not the live policy (engine: vllm or vllm_server): the hf "
                "engine generates with the very weights being trained"
            )
        if not callable(getattr(module.rollout_source, "batch_at", None)):
            raise ConfigError("async_rollouts needs a datamodule that can make batch i ahead of time (batch_at)")
        per_batch, limit = module.optimizer_steps_per_batch(), self.max_staleness
        if limit < per_batch:
            raise ConfigError(
                f"max_staleness={limit} is below the {per_batch} optimizer steps one batch takes: every rollout "
                f"sampled ahead would be {per_batch} steps old; raise max_staleness to >= {per_batch} or turn "
                "async_rollouts off"
            )
        return limit // per_batch

    def _sample(self, index: int) -> Prefetched:
        """On the worker: sync the engine to the newest weights, then sample batch ``index``."""
        module = self.module
        with self.lock:
            module.sync_engine()
            version = module.engine_synced_at
        source = module.rollout_source
        return Prefetched(source.rollout(module.engine, source.batch_at(index), module.sampling), version)

    def close(self, wait: bool = True) -> None:
        """Stop the worker (queued batches cancelled; ``wait`` for the one being sampled)."""
        if self._prefetcher is not None:
            self._prefetcher.close(wait=wait)
            self._prefetcher = None
