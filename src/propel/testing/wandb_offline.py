"""Read an offline W&B run folder back (history rows), without syncing: for tests and checks by hand.

The ``.wandb`` file is a LevelDB-style log of protobuf ``Record`` messages: a 7-byte file header, then 32 KiB
blocks of chunks, each with a 7-byte header (crc32c, little-endian length, chunk type FULL/FIRST/MIDDLE/LAST).
"""

from __future__ import annotations

import json
import struct
import time
from pathlib import Path

_BLOCK = 32 * 1024
_HEADER = 7
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def _records(data: bytes):
    pos, pending = _HEADER, b""
    while pos + _HEADER <= len(data):
        room = _BLOCK - (pos % _BLOCK)
        if room < _HEADER:  # block trailer padding
            pos += room
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + _HEADER])
        chunk = data[pos + _HEADER : pos + _HEADER + length]
        pos += _HEADER + length
        if kind == 0 and length == 0:  # zero padding at the end of a block
            pos += _BLOCK - (pos % _BLOCK) if pos % _BLOCK else 0
            continue
        if kind == _FULL:
            yield chunk
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            yield pending + chunk
            pending = b""


def find_run_file(run_dir: str | Path) -> Path:
    """The ``run-*.wandb`` file of a run folder (or of the newest offline run below ``run_dir``)."""
    run_dir = Path(run_dir)
    files = sorted(run_dir.glob("run-*.wandb")) or sorted(
        run_dir.glob("**/offline-run-*/run-*.wandb"), key=lambda p: p.stat().st_mtime
    )
    if not files:
        raise FileNotFoundError(f"no run-*.wandb file under {run_dir}")
    return files[-1]


def read_history(run_dir: str | Path) -> list[dict]:
    """History rows (``wandb.log`` calls) of an offline run, as dicts of key -> value."""
    from wandb.proto import wandb_internal_pb2 as pb

    rows = []
    for raw in _records(find_run_file(run_dir).read_bytes()):
        record = pb.Record()
        try:
            record.ParseFromString(raw)
        except Exception:  # noqa: BLE001 - a truncated last record after a crash
            continue
        if record.WhichOneof("record_type") == "history":
            rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item})
    return rows


def wait_for_history(run_dir: str | Path, key: str, count: int, timeout_s: float = 60.0) -> list[dict]:
    """``read_history`` once at least ``count`` rows hold ``key``, or whatever is there after ``timeout_s``: the W&B
    service writes the run file asynchronously, even after ``finish()`` returns."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            rows = read_history(run_dir)
        except FileNotFoundError:
            rows = []
        if sum(key in row for row in rows) >= count or time.monotonic() > deadline:
            return rows
        time.sleep(0.25)
