"""The datamodule that feeds generator contexts to labeling (``propel predict``) and evaluation (``propel test``).

It skips context ids already in the pool folder, so a killed labeling or evaluation run resumes and redoes nothing.
"""

from __future__ import annotations

from lightning.pytorch import LightningDataModule
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader

from propel.domains.base import Context, Domain
from propel.errors import ConfigError
from propel.pools.io import read_pool


def _list_collate(batch: list[Context]) -> list[Context]:
    return batch


class TaskPoolDataModule(LightningDataModule):
    """Generator contexts, minus the ones already in the pool.

    Args:
        domain: the task domain (the contexts' source).
        pool_dir: the pool folder the run writes (``PoolWriter.output_dir`` for labeling, the evaluation module's
            ``output_dir``): its ids are skipped; None labels every context.
        n_tasks: contexts in total (ids ``<domain>-<seed>-<i>``, i < n_tasks).
        seed: context seed (few-shot example choice); keep evaluation's apart from labeling's.
        batch_size: contexts per step (one Parquet part per step).
    """

    def __init__(
        self,
        domain: Domain,
        pool_dir: str | None = None,
        n_tasks: int = 64,
        seed: int = 0,
        batch_size: int = 8,
    ):
        super().__init__()
        if not isinstance(domain, Domain):
            raise ConfigError(f"data.domain must be a propel.domains.base.Domain, got {type(domain).__name__}")
        if n_tasks < 1:
            raise ConfigError(f"data.n_tasks must be >= 1, got {n_tasks}")
        if batch_size < 1:
            raise ConfigError(f"data.batch_size must be >= 1, got {batch_size}")
        self.domain, self.pool_dir = domain, pool_dir
        self.n_tasks, self.seed, self.batch_size = n_tasks, seed, batch_size
        self.skipped = 0

    def pending(self) -> list[Context]:
        """Contexts not yet in the pool."""
        contexts = self.domain.contexts(self.n_tasks, self.seed)
        done = set(read_pool(self.pool_dir)["id"])
        todo = [c for c in contexts if c.id not in done]
        self.skipped = len(contexts) - len(todo)
        if self.skipped:
            rank_zero_info(
                f"resuming: {self.skipped} of {len(contexts)} tasks already in {self.pool_dir}, "
                f"labeling the other {len(todo)}"
            )
        return todo

    def _loader(self) -> DataLoader:
        return DataLoader(self.pending(), batch_size=self.batch_size, shuffle=False, collate_fn=_list_collate)

    def predict_dataloader(self) -> DataLoader:
        return self._loader()

    def test_dataloader(self) -> DataLoader:
        return self._loader()
