"""Writes labeled tasks to a Parquet pool as they are produced (one atomic part file per batch) and summarizes.

A kill loses at most the batch in flight: finished parts are complete files (``propel.pools.write_part``) and
``TaskPoolDataModule`` skips their ids on the rerun. On a stop on a signal the datamodule notes how many tasks the
pool holds, for the command's last line (``propel.cli.stops``); under another datamodule the writer notes the rows
this run kept.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from lightning.pytorch.callbacks import BasePredictionWriter

from propel.cli import stops
from propel.datamodules.task_pool import TaskPoolDataModule
from propel.lit_modules.labeling import LabelingModule
from propel.pools.io import read_pool, write_part
from propel.pools.summary import pool_summary, print_summary_table


class PoolWriter(BasePredictionWriter):
    """Lightning prediction writer for labeling rows (``LabelingModule.predict_step``).

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

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        # TaskPoolDataModule counts what the folder holds (its own note); another datamodule: this run's rows
        if stops.is_stop(exception) and not isinstance(trainer.datamodule, TaskPoolDataModule):
            stops.note(f"kept the {self.rows_written} labeled rows this run wrote to {self.output_dir}", resumable=True)

    def on_predict_end(self, trainer, pl_module) -> None:
        # every rank's parts are on disk before rank 0 reads the pool; the row count is all ranks'
        trainer.strategy.barrier("PoolWriter.on_predict_end")
        rows_written = int(
            trainer.strategy.reduce(torch.tensor(float(self.rows_written), device=pl_module.device), reduce_op="sum")
        )
        if not isinstance(pl_module, LabelingModule):
            raise TypeError(f"PoolWriter writes LabelingModule rows, got {type(pl_module).__name__}")
        throughput = pl_module.throughput()  # all ranks' counts: every rank takes part
        if trainer.global_rank != 0:
            return
        summary = pool_summary(read_pool(self.output_dir), pl_module.n_trials)
        summary.update({"rows_written_this_run": rows_written, **throughput})
        self.output_dir.mkdir(parents=True, exist_ok=True)
        (self.output_dir / "summary.json").write_text(json.dumps(summary, indent=1))
        print_summary_table(summary, f"labeling summary ({self.output_dir})")
        if trainer.logger is not None:
            metrics = {f"label/{k}": float(v) for k, v in summary.items() if isinstance(v, (int, float))}
            metrics.update({f"label/solve_count_{k}": float(c) for k, c in enumerate(summary["solve_count_hist"])})
            trainer.logger.log_metrics(metrics)
