"""A fixed set of worker slots shared by threads: check a slot out, run one job on its worker, respawn it if lost.

Both backends use it; they differ only in how a worker is spawned (bubblewrap process or container exec).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable

from propel.sandbox.job import Job, Limits, Result, SandboxError
from propel.sandbox.protocol import Channel, WorkerLost, exchange, lost_result, read_header


class WorkerPool:
    """``size`` slots, each holding at most one live worker; a job never shares a worker with a concurrent job."""

    def __init__(self, spawn: Callable[[int], Channel], size: int, on_lost: Callable[[int, int | None], None] = None):
        """Args:
        spawn: starts the worker for a slot and returns its channel (the worker has not said 'ready' yet).
        size: number of slots (concurrent jobs).
        on_lost: called with (slot, child pid) after a worker was lost mid-job, to clean up what it left.
        """
        self._spawn = spawn
        self._on_lost = on_lost
        self._channels: list[Channel | None] = [None] * size
        self._idle: queue.Queue[int] = queue.Queue()
        for slot in range(size):
            self._idle.put(slot)
        self._closed = False
        self._lock = threading.Lock()

    def _channel(self, slot: int) -> Channel:
        channel = self._channels[slot]
        if channel is None:
            channel = self._spawn(slot)
            try:
                ready = read_header(channel, time.monotonic() + 60.0)
                if ready.get("event") != "ready":
                    raise WorkerLost(f"worker sent {ready.get('event')!r} instead of 'ready'")
            except WorkerLost as e:
                detail = channel.diagnostics().strip()
                channel.close()
                said = f"; worker said: {detail}" if detail else ""
                raise SandboxError(f"sandbox worker failed to start: {e}{said}") from e
            self._channels[slot] = channel
        return channel

    def warm_up(self) -> None:
        """Start every slot's worker now instead of on first use."""
        slots = [self._idle.get() for _ in range(len(self._channels))]
        try:
            for slot in slots:
                self._channel(slot)
        finally:
            for slot in slots:
                self._idle.put(slot)

    def run(self, job: Job, limits: Limits) -> Result:
        if self._closed:
            raise RuntimeError("this sandbox is closed")
        slot = self._idle.get()
        start = time.monotonic()
        try:
            channel = self._channel(slot)
            try:
                result, pid = exchange(channel, job, limits)
                return result
            except WorkerLost as e:
                self._drop(slot, e.pid)
                return lost_result(e, time.monotonic() - start)
            except BaseException:
                # Interrupted mid-exchange (KeyboardInterrupt, a signal handler's exception): the worker may still
                # send this job's answer, which the next job would read as its own. Discard the worker.
                self._drop(slot, None)
                raise
        finally:
            self._idle.put(slot)

    def _drop(self, slot: int, pid: int | None) -> None:
        channel, self._channels[slot] = self._channels[slot], None
        if channel is not None:
            channel.close()
        if self._on_lost is not None:
            self._on_lost(slot, pid)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for slot, channel in enumerate(self._channels):
            if channel is not None:
                channel.close()
            self._channels[slot] = None
