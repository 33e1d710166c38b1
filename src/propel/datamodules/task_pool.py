"""The datamodule that feeds generator contexts to labeling (``propel predict``) and evaluation (``propel test``).

It skips context ids already in the pool folder, so a killed labeling or evaluation run resumes and redoes nothing,
and before that checks the folder's settings manifest (``propel.pools.manifest``): a rerun with another model,
adapter, solver, domain or seed stops with one line instead of mixing its rows with the old ones. A stop on a signal
notes how many of the run's tasks the folder holds, for the command's last line (``propel.cli.stops``), and every
line names the job by its own name: labeling (``propel predict``) or evaluation (``propel test``).

Several processes (``trainer.strategy: ddp``, ``devices: N``): the full context list is cut into batches of
``batch_size`` and batch ``b`` goes to rank ``b % N``; each rank then drops the ids already in the pool. The split
depends on the context list alone, not on what the pool holds when a rank reads it (another rank may already be
writing), so every id is labeled by exactly one rank, and each batch holds the contexts (and so the sampling seed) it
would hold in one process: N ranks write the same rows as one.
"""

from __future__ import annotations

from pathlib import Path

from lightning.pytorch import LightningDataModule
from lightning.pytorch.callbacks import BasePredictionWriter
from lightning.pytorch.utilities import rank_zero_info
from torch.utils.data import DataLoader, IterableDataset

from propel.cli import stops
from propel.domains.interface import Domain
from propel.errors import ConfigError
from propel.pools.io import read_pool
from propel.pools.manifest import check_manifest, run_settings
from propel.records import Context


def _list_collate(batch: list[Context]) -> list[Context]:
    return batch


class _Batches(IterableDataset):
    """Ready-made batches of contexts (an iterable dataset, so Lightning adds no distributed sampler of its own)."""

    def __init__(self, batches: list[list[Context]]):
        self.batches = batches

    def __iter__(self):
        return iter(self.batches)

    def __len__(self) -> int:
        return len(self.batches)


class TaskPoolDataModule(LightningDataModule):
    """Generator contexts, minus the ones already in the pool.

    Args:
        domain: the task domain (the contexts' source).
        pool_dir: the pool folder the run writes, whose ids are skipped. None (the default) follows the folder the
            run writes: the evaluation module's ``output_dir``, or the prediction writer's (``PoolWriter``) for
            labeling. A value that differs from that folder is refused: an interpolation such as
            ``${model.init_args.output_dir}`` is resolved when the file is read, so a command-line override of the
            output folder would otherwise resume from (and skip the ids of) the old one.
        n_tasks: contexts in total (ids ``<domain>-<seed>-<i>``, i < n_tasks).
        seed: context seed (few-shot example choice); keep evaluation's apart from labeling's.
        batch_size: contexts per step (one Parquet part per step); under several processes, whole batches are
            dealt to the ranks in turn.
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
            raise ConfigError(f"data.domain must be a propel.domains.interface.Domain, got {type(domain).__name__}")
        if n_tasks < 1:
            raise ConfigError(f"data.n_tasks must be >= 1, got {n_tasks}")
        if batch_size < 1:
            raise ConfigError(f"data.batch_size must be >= 1, got {batch_size}")
        self.domain, self.pool_dir = domain, pool_dir
        self.n_tasks, self.seed, self.batch_size = n_tasks, seed, batch_size
        self.skipped = 0
        self.complete = False
        """Every context is in the pool already (a rerun of a run that wrote its last rows, then stopped)."""
        self.job = "labeling"
        """What the run is called in its messages: ``labeling`` (predict) or ``evaluation`` (test)."""

    def setup(self, stage: str) -> None:
        """Write or check the pool folder's settings manifest (the running module's settings + the context seed)."""
        self.job = "evaluation" if stage == "test" else "labeling"
        module = self.trainer.lightning_module if self.trainer is not None else None
        written = self._written_folder()
        if self.pool_dir is None and written is not None:
            self.pool_dir = str(written)
        elif self.pool_dir is not None and written is not None and Path(self.pool_dir).resolve() != written.resolve():
            raise ConfigError(
                f"data.init_args.pool_dir ({self.pool_dir}) is not the folder this run writes ({written}): resuming "
                "would skip the ids of another folder; leave pool_dir unset (it follows the output folder) or set both"
            )
        if self.pool_dir is not None and module is not None:
            check_manifest(self.pool_dir, run_settings(module, self.seed), "pool folder")

    def _written_folder(self) -> Path | None:
        """The folder this run writes rows to: the module's ``output_dir`` (evaluation), else the one prediction
        writer's (labeling's ``PoolWriter``); None when neither exists."""
        if self.trainer is None:
            return None
        out = getattr(self.trainer.lightning_module, "output_dir", None)
        if out is None:
            writers = [
                cb.output_dir
                for cb in self.trainer.callbacks
                if isinstance(cb, BasePredictionWriter) and getattr(cb, "output_dir", None) is not None
            ]
            out = writers[0] if len(writers) == 1 else None
        return None if out is None else Path(out)

    def pending(self) -> list[Context]:
        """This rank's contexts not yet in the pool, in batch order."""
        return [c for batch in self.pending_batches() for c in batch]

    def pending_batches(self) -> list[list[Context]]:
        """This rank's batches (every ``world``-th batch of the full list, from its rank on), minus the contexts
        already in the pool; batches left empty are dropped."""
        contexts = self.domain.contexts(self.n_tasks, self.seed)
        done = set(read_pool(self.pool_dir)["id"])
        rank, world = (self.trainer.global_rank, self.trainer.world_size) if self.trainer is not None else (0, 1)
        size = self.batch_size
        batches = [contexts[i : i + size] for i in range(rank * size, len(contexts), world * size)]
        self.skipped = sum(c.id in done for c in contexts)
        self.complete = self.skipped == len(contexts)
        if self.skipped:
            doing = "evaluating" if self.job == "evaluation" else "labeling"
            rank_zero_info(
                f"resuming: {self.skipped} of {len(contexts)} tasks already in {self.pool_dir}, "
                f"{doing} the other {len(contexts) - self.skipped}"
            )
        todo = [[c for c in batch if c.id not in done] for batch in batches]
        return [batch for batch in todo if batch]

    def on_exception(self, exception: BaseException) -> None:
        """On a stop (Ctrl-C, SIGTERM): note how many of the run's tasks the folder holds, this run's and earlier
        runs' alike: what a rerun resumes from."""
        if not stops.is_stop(exception) or self.pool_dir is None:
            return
        ids = {c.id for c in self.domain.contexts(self.n_tasks, self.seed)}
        held = len(ids & set(read_pool(self.pool_dir)["id"]))
        whose = "the evaluation" if self.job == "evaluation" else "the labeled pool"
        stops.note(f"{whose} holds {held} of {len(ids)} tasks in {self.pool_dir}", resumable=held > 0)

    def _loader(self) -> DataLoader:
        return DataLoader(_Batches(self.pending_batches()), batch_size=None, collate_fn=_list_collate)

    def predict_dataloader(self) -> DataLoader:
        return self._loader()

    def test_dataloader(self) -> DataLoader:
        return self._loader()
