"""Writes labeled tasks to a Parquet pool as they are produced (one atomic part file per batch) and summarizes.

A kill loses at most the batch in flight: finished parts are complete files (written to a temp name, then renamed)
and ``TaskPoolDataModule`` skips their ids on the rerun.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from lightning.pytorch.callbacks import BasePredictionWriter

from propel.datamodules.task_pool import read_pool

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("group", pa.string()),
        ("domain", pa.string()),
        ("context", pa.string()),
        ("completion", pa.string()),
        ("task", pa.string()),
        ("valid", pa.bool_()),
        ("reason", pa.string()),
        ("grades", pa.list_(pa.bool_())),
        ("solve_count", pa.int32()),
        ("label", pa.int8()),
        ("topic", pa.string()),
        ("n_trials", pa.int32()),
        ("solver_tokens", pa.int64()),
    ]
)


def write_part(output_dir: Path, rows: list[dict], schema: pa.Schema = SCHEMA, rank: int = 0) -> Path:
    """Write ``rows`` as one new part file of the pool in ``output_dir``, atomically (temp name, then rename)."""
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pylist(rows, schema=schema)
    tag = zlib.crc32("\n".join(r["id"] for r in rows).encode())
    final = output_dir / f"part-{time.time_ns()}-r{rank}-{tag:08x}.parquet"
    tmp = final.with_name("." + final.name + ".tmp")
    pq.write_table(table, tmp)
    os.replace(tmp, final)
    return final


def pool_summary(frame, n_trials: int) -> dict:
    """Valid rate, solve-count histogram 0..n over valid tasks, and share of positives among valid tasks."""
    valid = frame[frame["valid"].astype(bool)] if len(frame) else frame
    counts = [int(c) for c in valid["solve_count"]] if len(valid) else []
    hist = [counts.count(k) for k in range(n_trials + 1)]
    positives = int(sum(int(x) for x in valid["label"])) if len(valid) else 0
    return {
        "tasks": len(frame),
        "valid": len(valid),
        "valid_rate": len(valid) / len(frame) if len(frame) else 0.0,
        "solve_count_hist": hist,
        "positives": positives,
        "positive_share": positives / len(valid) if len(valid) else 0.0,
    }


class PoolWriter(BasePredictionWriter):
    """Lightning prediction writer for labeling rows.

    Args:
        output_dir: pool folder (created); part files ``part-<time>-<crc>.parquet`` and ``summary.json`` go here.
    """

    def __init__(self, output_dir: str = "pools/pool"):
        super().__init__(write_interval="batch")
        self.output_dir = Path(output_dir)
        self.rows_written = 0

    def write_on_batch_end(self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx=0):
        if not prediction:  # every rank writes its own parts (rank in the name)
            return
        write_part(self.output_dir, prediction, rank=trainer.global_rank)
        self.rows_written += len(prediction)

    def on_predict_end(self, trainer, pl_module) -> None:
        if trainer.global_rank != 0:
            return
        n_trials = getattr(pl_module, "n_trials", 8)
        summary = pool_summary(read_pool(self.output_dir), n_trials)
        stats = getattr(pl_module, "throughput", lambda: {})()
        summary.update({"rows_written_this_run": self.rows_written, **stats})
        self.output_dir.mkdir(parents=True, exist_ok=True)
        (self.output_dir / "summary.json").write_text(json.dumps(summary, indent=1))
        _print_summary(summary, self.output_dir)
        if trainer.logger is not None:
            metrics = {f"label/{k}": float(v) for k, v in summary.items() if isinstance(v, (int, float))}
            metrics.update({f"label/solve_count_{k}": float(c) for k, c in enumerate(summary["solve_count_hist"])})
            trainer.logger.log_metrics(metrics)


def print_summary_table(summary: dict, title: str) -> None:
    """A metric/value table on the console (floats to 4 significant digits)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value")
    for key, value in summary.items():
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    Console().print(table)


def _print_summary(summary: dict, output_dir: Path) -> None:
    print_summary_table(summary, f"labeling summary ({output_dir})")
