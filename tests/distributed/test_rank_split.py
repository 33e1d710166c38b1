"""How the context stream and the task pool split their items over data-parallel ranks (in one process: a real
Trainer configured for 2 DDP processes, whose rank is set by hand; nothing is launched)."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch

from propel.datamodules.stream import ContextStreamDataModule
from propel.datamodules.task_pool import TaskPoolDataModule
from propel.domains.math import MathExpressionDomain
from propel.errors import ConfigError
from propel.pools.io import write_part


def trainer(world: int, rank: int) -> pl.Trainer:
    t = pl.Trainer(
        accelerator="cpu",
        devices=world,
        strategy="ddp" if world > 1 else "auto",
        logger=False,
        enable_progress_bar=False,
    )
    if world > 1:
        t.strategy.cluster_environment.set_global_rank(rank)
    return t


def stream(world: int, rank: int, contexts_per_step: int = 4) -> ContextStreamDataModule:
    dm = ContextStreamDataModule(MathExpressionDomain(), contexts_per_step=contexts_per_step, seed=3)
    dm.trainer = trainer(world, rank)
    return dm


def ids(batch) -> list[str]:
    return [c.id for c in batch.contexts]


def test_each_rank_takes_its_contiguous_share_of_the_global_batch():
    one = stream(1, 0)
    for index in (0, 5):
        halves = [ids(stream(2, r).batch_at(index)) for r in (0, 1)]
        assert len(halves[0]) == len(halves[1]) == 2 and not set(halves[0]) & set(halves[1])
        assert halves[0] + halves[1] == ids(one.batch_at(index))
    assert ids(stream(2, 0).batch_at(0)) != ids(stream(2, 0).batch_at(1))


def test_a_batch_that_does_not_split_is_refused_before_the_first_rollout():
    with pytest.raises(ConfigError, match="contexts_per_step \\(3\\) must be a multiple of the number of processes"):
        stream(2, 1, contexts_per_step=3).train_dataloader()


def test_each_rank_restores_its_own_rng_and_a_changed_world_warns():
    states = [torch.manual_seed(s).get_state() for s in (1, 2)]
    saved = {"next_index": 7, "torch_rng": states[0], "cuda_rng": None}
    saved["rank_rngs"] = [{"torch_rng": s, "cuda_rng": None} for s in states]
    dm = stream(2, 1)
    dm.load_state_dict(saved)
    assert dm.next_index == 7 and torch.equal(dm._pending_rng, states[1])
    with pytest.warns(UserWarning, match="written by 2 process\\(es\\), this run has 1"):
        stream(1, 0).load_state_dict(saved)
    assert "rank_rngs" not in stream(1, 0).state_dict()  # one process gathers nothing


def pool(tmp_path, world: int, rank: int, n_tasks: int = 10) -> TaskPoolDataModule:
    dm = TaskPoolDataModule(MathExpressionDomain(), pool_dir=str(tmp_path), n_tasks=n_tasks, batch_size=2)
    dm.trainer = trainer(world, rank)
    return dm


def test_labeling_batches_are_dealt_to_ranks_whole_and_done_ids_skipped(tmp_path):
    one = [[c.id for c in b] for b in pool(tmp_path, 1, 0).pending_batches()]
    ranks = [[[c.id for c in b] for b in pool(tmp_path, 2, r).pending_batches()] for r in (0, 1)]
    assert len(one) == 5 and ranks == [one[0::2], one[1::2]]  # the same batches (and so seeds) as one process
    done = one[2][:1] + one[1]  # half of rank 0's second batch, all of rank 1's first
    write_part(tmp_path, [{"id": i, "valid": False} for i in done])
    left = [[[c.id for c in b] for b in pool(tmp_path, 2, r).pending_batches()] for r in (0, 1)]
    assert left == [[one[0], one[2][1:], one[4]], [one[3]]]
    loader = pool(tmp_path, 2, 0).predict_dataloader()
    assert [[c.id for c in b] for b in loader] == left[0] and len(loader) == 3
