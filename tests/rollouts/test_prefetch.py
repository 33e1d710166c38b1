"""RolloutPrefetcher: batches produced in order on one worker thread, ahead of the one taken."""

from __future__ import annotations

import threading
import time

import pytest

from propel.rollouts.prefetch import Prefetched, RolloutPrefetcher
from propel.rollouts.steps import Rollout


class Producer:
    def __init__(self, delay_s: float = 0.0, fail_at: int | None = None) -> None:
        self.calls: list[tuple[int, str]] = []
        self.delay_s, self.fail_at = delay_s, fail_at

    def __call__(self, index: int) -> Prefetched:
        self.calls.append((index, threading.current_thread().name))
        time.sleep(self.delay_s)
        if index == self.fail_at:
            raise RuntimeError(f"engine died on batch {index}")
        return Prefetched(Rollout(groups=[]), version=index)


def test_takes_in_order_and_keeps_the_next_batches_in_flight():
    produce = Producer()
    pre = RolloutPrefetcher(produce, ahead=2)
    assert pre.take(0).version == 0 and pre.pending == [1, 2]
    assert pre.take(1).version == 1 and pre.pending == [2, 3]
    pre.close()
    assert [i for i, _ in produce.calls][:3] == [0, 1, 2]
    assert all(name.startswith("propel-rollouts") for _, name in produce.calls)  # never the caller's thread


def test_generation_overlaps_the_callers_work():
    """With the next batch in flight, a step that works as long as generation takes waits for almost nothing."""
    pre = RolloutPrefetcher(Producer(delay_s=0.2), ahead=1)
    pre.take(0)
    time.sleep(0.3)  # "training" on batch 0 while batch 1 is sampled
    got = pre.take(1)
    pre.close()
    assert got.wait_s < 0.1, got.wait_s


def test_a_jump_in_the_stream_cancels_the_batches_before_it():
    produce = Producer(delay_s=0.05)
    pre = RolloutPrefetcher(produce, ahead=3)
    pre.take(0)
    assert pre.take(5).version == 5 and pre.pending == [6, 7, 8]
    pre.close()
    assert 5 in [i for i, _ in produce.calls]


def test_a_worker_error_is_raised_by_the_take_of_that_batch():
    pre = RolloutPrefetcher(Producer(fail_at=1), ahead=1)
    pre.take(0)
    with pytest.raises(RuntimeError, match="engine died on batch 1"):
        pre.take(1)
    pre.close()


def test_close_cancels_queued_batches():
    produce = Producer(delay_s=0.2)
    pre = RolloutPrefetcher(produce, ahead=3)
    pre.take(0)
    pre.close()
    assert len(produce.calls) <= 2  # batch 1 may be running when close() is called; 2 and 3 never start
    with pytest.raises(ValueError, match="ahead"):
        RolloutPrefetcher(produce, ahead=0)
