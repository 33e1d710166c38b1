"""Ticket files: write the synthetic set as Parquet; read a user's own tickets (Parquet or JSONL, same schema).

``load_tickets`` checks every row against ``schema.REQUIRED`` and names the file, the row and the missing column in
one ``ConfigError`` line instead of failing later inside a reward.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path

from propel.errors import ConfigError
from propel.tasks.triage.schema import COLUMNS, REQUIRED, Ticket


def write_parquet(tickets: Sequence[Ticket], path: str | Path) -> Path:
    """Write ``tickets`` to one Parquet file (columns ``schema.COLUMNS``); returns the path."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = [t.to_row() for t in tickets]
    table = pa.Table.from_pylist(rows).select(list(COLUMNS))
    pq.write_table(table, path)
    return path


def write_jsonl(tickets: Sequence[Ticket], path: str | Path) -> Path:
    """Write ``tickets`` as JSON lines (the same schema, readable by ``load_tickets``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(t.to_row()) + "\n" for t in tickets))
    return path


def load_tickets(path: str | Path) -> list[Ticket]:
    """Tickets from ``.parquet`` or ``.jsonl`` / ``.json`` (JSON lines, optionally ``.gz``) in ``schema.COLUMNS``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"triage tickets: no file {path} (write one with python -m propel.tasks.triage.make_dataset)")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        schema_names = pq.read_schema(path).names
        missing = [c for c in REQUIRED if c not in schema_names]
        if missing:
            raise ConfigError(f"{path}: missing column(s) {missing}; a triage ticket needs {list(REQUIRED)}")
        rows = pq.read_table(path).to_pylist()
    elif path.name.endswith((".jsonl", ".json", ".jsonl.gz", ".json.gz")):
        raw = path.read_bytes()
        text = (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8")
        rows = []
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise ConfigError(f"{path}:{i}: not a JSON object ({e.msg})") from None
            if not isinstance(rows[-1], dict):
                raise ConfigError(f"{path}:{i}: each line must be a JSON object, got {type(rows[-1]).__name__}")
    else:
        raise ConfigError(f"triage tickets: {path} must be .parquet or .jsonl (optionally .gz)")
    if not rows:
        raise ConfigError(f"{path}: no tickets")
    tickets = [Ticket.from_row(r, where=f"{path} row {i}") for i, r in enumerate(rows, start=1)]
    ids = [t.ticket_id for t in tickets]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise ConfigError(f"{path}: ticket_id must be unique, repeated: {dup}")
    return tickets
