"""The byte stream to a worker started with ``docker exec``: its attached stdin, and its stdout demultiplexed from
Docker's 8-byte stream frames (stderr kept as the worker's diagnostics)."""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import time

from propel.sandbox.protocol import Channel, WorkerLost

_FRAME = struct.Struct(">BxxxI")  # docker's multiplexed stream header: stream id, size


class ExecChannel(Channel):
    """The attached stdin/stdout of one ``docker exec``; stdout and stderr arrive multiplexed in 8-byte frames."""

    def __init__(self, sock, on_close=None):
        self._sock: socket.socket = getattr(sock, "_sock", sock)
        self._holder = sock
        self._stdout = bytearray()
        self._stderr = bytearray()
        self._pending = bytearray()
        self._on_close = on_close

    def send(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as e:
            raise WorkerLost(f"worker is gone ({e})") from e

    def _pump(self, deadline: float) -> None:
        wait = deadline - time.monotonic()
        if wait <= 0:
            raise WorkerLost("worker did not answer before the guard deadline", timed_out=True)
        ready, _, _ = select.select([self._sock], [], [], wait)
        if not ready:
            return
        try:
            chunk = self._sock.recv(1 << 20)
        except OSError as e:
            raise WorkerLost(f"worker connection failed ({e})") from e
        if not chunk:
            raise WorkerLost("worker exited (exec stream closed)")
        self._pending += chunk
        while len(self._pending) >= _FRAME.size:
            stream, size = _FRAME.unpack_from(self._pending)
            if len(self._pending) < _FRAME.size + size:
                break
            payload = self._pending[_FRAME.size : _FRAME.size + size]
            del self._pending[: _FRAME.size + size]
            if stream == 1:
                self._stdout += payload
            else:
                self._stderr = (self._stderr + payload)[-4000:]

    def recv_exact(self, n: int, deadline: float) -> bytes:
        while len(self._stdout) < n:
            self._pump(deadline)
        out = bytes(self._stdout[:n])
        del self._stdout[:n]
        return out

    def diagnostics(self) -> str:
        return self._stderr.decode("utf-8", errors="replace")

    def close(self) -> None:
        for s in (self._sock, self._holder):
            with contextlib.suppress(OSError):
                s.close()
        if self._on_close is not None:
            self._on_close()
