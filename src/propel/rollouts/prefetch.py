"""Rollouts sampled ahead on a background thread, so that generating batch k+1 overlaps training on batch k.

This is the one-step (or k-step) off-policy mode of verl's and prime-rl's asynchronous trainers, inside one process:
one worker thread owns the rollout engine (weight syncs and generation), the training loop takes each batch's
rollouts when it reaches that batch and immediately queues the batches after it. The worker produces batches in
order, one at a time, so the engine never sees two callers. The caller supplies ``produce(index)``, which syncs the
engine to the newest weights and returns the batch's rollouts with the optimizer step of the weights that sampled
them; how stale a rollout may get is bounded by how far ahead the worker is allowed to run (``ahead``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from propel.rollouts.steps import Rollout


@dataclass
class Prefetched:
    """A batch's rollouts, the optimizer step whose weights sampled them, and how long the trainer waited for them."""

    rollout: Rollout
    version: int
    wait_s: float = 0.0


class RolloutPrefetcher:
    """Keeps the rollouts of the ``ahead`` batches after the current one in flight on one worker thread.

    Args:
        produce: ``index -> Prefetched`` for batch ``index`` (runs on the worker thread; an exception it raises is
            raised again by the ``take`` of that batch).
        ahead: batches sampled ahead of the one being trained on (>= 1).
    """

    def __init__(self, produce: Callable[[int], Prefetched], ahead: int = 1) -> None:
        if ahead < 1:
            raise ValueError(f"ahead must be >= 1, got {ahead}")
        self._produce, self.ahead = produce, ahead
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="propel-rollouts")
        self._pending: dict[int, Future[Prefetched]] = {}

    @property
    def pending(self) -> list[int]:
        """Batch indices queued or being sampled, in order."""
        return sorted(self._pending)

    def take(self, index: int) -> Prefetched:
        """Batch ``index``'s rollouts (sampled now if they were not queued), after queueing the ``ahead`` next ones.

        Queued batches before ``index`` (a stream that jumped, e.g. a resumed run) are cancelled.
        """
        for old in [i for i in self._pending if i < index]:
            self._pending.pop(old).cancel()
        future = self._pending.pop(index, None) or self._pool.submit(self._produce, index)
        for later in range(index + 1, index + 1 + self.ahead):
            if later not in self._pending:
                self._pending[later] = self._pool.submit(self._produce, later)
        start = time.perf_counter()
        got = future.result()
        got.wait_s = time.perf_counter() - start
        return got

    def close(self, wait: bool = True) -> None:
        """Cancel the queued batches; with ``wait``, also wait for the one being sampled (an engine call cannot be
        interrupted; without it the worker thread ends on its own after that batch)."""
        for future in self._pending.values():
            future.cancel()
        self._pending.clear()
        self._pool.shutdown(wait=wait, cancel_futures=True)
