"""Task pools on disk (Parquet part files) and the predict-time datamodule that feeds generator contexts.

A pool is a folder of ``part-*.parquet`` files, one per labeled batch, written atomically by ``PoolWriter``. The
datamodule skips context ids already in the pool, so a killed labeling run resumes and redoes nothing.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from lightning.pytorch import LightningDataModule
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader

from propel.domains.base import Context, Domain
from propel.errors import ConfigError

POOL_COLUMNS = [
    "id",
    "group",
    "domain",
    "context",
    "completion",
    "task",
    "valid",
    "reason",
    "grades",
    "solve_count",
    "label",
    "topic",
    "n_trials",
    "solver_tokens",
]


def pool_parts(path: str | Path) -> list[Path]:
    """The finished part files of a pool folder, in write order."""
    folder = Path(path)
    return sorted(folder.glob("part-*.parquet")) if folder.is_dir() else []


def read_pool(path: str | Path) -> pd.DataFrame:
    """All rows of a pool folder (or one Parquet file), one per task id (first write wins)."""
    path = Path(path)
    files = [path] if path.is_file() else pool_parts(path)
    if not files:
        return pd.DataFrame(columns=POOL_COLUMNS)
    frame = pd.concat([pd.read_parquet(f) for f in files], ignore_index=True)
    if "id" not in frame.columns:  # not a pool; callers report the missing column
        return frame
    return frame.drop_duplicates("id", keep="first").reset_index(drop=True)


def _list_collate(batch: list[Context]) -> list[Context]:
    return batch


class TaskPoolDataModule(LightningDataModule):
    """Generator contexts for ``propel predict``, minus the ones already labeled.

    Args:
        n_tasks: contexts to label in total (ids ``<domain>-<seed>-<i>``, i < n_tasks).
        seed: context seed (few-shot example choice).
        batch_size: contexts per predict step (one Parquet part per step).
        pool_dir: the pool folder to resume from; defaults to the ``PoolWriter`` callback's ``output_dir``.
        domain: the task domain; defaults to the LightningModule's ``domain``.
    """

    def __init__(
        self,
        n_tasks: int = 64,
        seed: int = 0,
        batch_size: int = 8,
        pool_dir: str | None = None,
        domain: Domain | None = None,
    ):
        super().__init__()
        if n_tasks < 1:
            raise ConfigError(f"data.n_tasks must be >= 1, got {n_tasks}")
        if batch_size < 1:
            raise ConfigError(f"data.batch_size must be >= 1, got {batch_size}")
        self.n_tasks, self.seed, self.batch_size = n_tasks, seed, batch_size
        self.pool_dir, self.domain = pool_dir, domain
        self.skipped = 0

    def _resolve(self) -> tuple[Domain, str | None]:
        domain = self.domain or getattr(
            getattr(self, "trainer", None) and self.trainer.lightning_module, "domain", None
        )
        if domain is None:
            raise ConfigError("TaskPoolDataModule needs a domain: set data.domain or use a module with a `domain`")
        pool_dir = self.pool_dir
        if pool_dir is None and getattr(self, "trainer", None) is not None:
            from propel.callbacks.pool_writer import PoolWriter

            writers = [cb for cb in self.trainer.callbacks if isinstance(cb, PoolWriter)]
            pool_dir = str(writers[0].output_dir) if writers else None
        return domain, pool_dir

    def pending(self) -> list[Context]:
        """Contexts not yet in the pool."""
        domain, pool_dir = self._resolve()
        contexts = domain.contexts(self.n_tasks, self.seed)
        done = set(read_pool(pool_dir)["id"]) if pool_dir else set()
        todo = [c for c in contexts if c.id not in done]
        self.skipped = len(contexts) - len(todo)
        if self.skipped:
            rank_zero_info(
                f"resuming: {self.skipped} of {len(contexts)} tasks already in {pool_dir}, "
                f"labeling the other {len(todo)}"
            )
        return todo

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(self.pending(), batch_size=self.batch_size, shuffle=False, collate_fn=_list_collate)
