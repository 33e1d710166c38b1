"""Reading and writing pools: a folder of ``part-*.parquet`` files, each written atomically (temp name, rename).

A kill loses at most the part in flight; readers see only finished parts, and the first write of an id wins.
"""

from __future__ import annotations

import time
import zlib
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from propel.durable import write_with
from propel.pools.schema import COLUMNS, SCHEMA


def pool_parts(path: str | Path) -> list[Path]:
    """The finished part files of a pool folder, in write order."""
    folder = Path(path)
    return sorted(folder.glob("part-*.parquet")) if folder.is_dir() else []


def read_pool(path: str | Path | None) -> pd.DataFrame:
    """All rows of a pool folder (or one Parquet file), one per task id (first write wins); empty when absent."""
    if path is None:
        return pd.DataFrame(columns=COLUMNS)
    path = Path(path)
    files = [path] if path.is_file() else pool_parts(path)
    if not files:
        return pd.DataFrame(columns=COLUMNS)
    frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    if "id" not in frame.columns:  # not a pool; callers report the missing column
        return frame
    return frame.drop_duplicates("id", keep="first").reset_index(drop=True)


def read_labels(path: str | Path, required: tuple[str, ...] = ("id", "label")) -> pd.DataFrame:
    """``read_pool`` for a pool that must exist and hold ``required`` columns (what a probe trains on)."""
    path = Path(path)
    if not (path.is_file() or pool_parts(path)):
        raise FileNotFoundError(f"labels_path: {path} is not a Parquet file or a pool folder with part-*.parquet")
    df = read_pool(path)
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ValueError(f"labels_path: {path} lacks column(s) {missing}; the pool needs {', '.join(required)}")
    return df


def write_part(output_dir: str | Path, rows: list[dict], schema: pa.Schema = SCHEMA, rank: int = 0) -> Path:
    """Write ``rows`` as one new part file of the pool in ``output_dir``, atomically and durably (temp name, fsync,
    rename, fsync of the folder)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=schema)
    tag = zlib.crc32("\n".join(r["id"] for r in rows).encode())
    final = output_dir / f"part-{time.time_ns()}-r{rank}-{tag:08x}.parquet"
    return write_with(final, lambda tmp: pq.write_table(table, tmp))  # a power loss keeps no torn part
