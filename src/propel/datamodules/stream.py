"""The resumable stream of task batches that online RL datamodules share.

Each training step takes one ``ContextBatch``: ``contexts_per_step`` contexts from a task source (anything with
``contexts(n, seed)``: a ``Domain``, ``ShellTasks``), drawn with a seed derived from (``seed``, batch index) so the
stream is reproducible. The state holds the next batch index and the global torch RNGs, CPU and (when CUDA is in
use) every CUDA device's, which HF sampling draws from, captured at the step boundary; a resumed run with the HF
engine therefore samples exactly what an uninterrupted run would have, on CPU and on GPU.

What a resume cannot reproduce: vLLM engines (``vllm``, ``vllm_server``) sample with their own generators inside
their worker processes (or the server), which no checkpoint holds, and batch their requests nondeterministically;
a resumed vLLM run continues from the right batch index with the right adapter weights, but draws different
completions than the uninterrupted run would have (same distribution, other samples). GPU kernels may also be
nondeterministic unless ``torch.use_deterministic_algorithms`` is on.

Data-parallel runs (``trainer.strategy: ddp``): ``contexts_per_step`` is the global batch. Every rank draws the same
global batch from the same seed and rolls out its own contiguous slice (rank ``r`` of ``W`` takes contexts
``r*k .. (r+1)*k - 1``, ``k = contexts_per_step / W``), so groups never straddle ranks and the split depends only on
the batch index: a resumed run continues every rank's share exactly. Each rank samples with its own RNG; the
checkpoint holds every rank's RNG states (gathered when it is written) and each rank restores its own.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import lightning.pytorch as pl
import torch
import torch.distributed as dist

from propel.errors import ConfigError
from propel.rollouts.steps import ContextBatch


class _ContextStream:
    def __init__(self, datamodule: ContextStreamDataModule) -> None:
        self.dm = datamodule

    def __iter__(self) -> Iterator[ContextBatch]:
        index = self.dm.next_index
        while True:
            yield self.dm.batch_at(index)
            index += 1


class ContextStreamDataModule(pl.LightningDataModule):
    """An unbounded, resumable stream of context batches from ``tasks`` (subclasses add how a batch is rolled out).

    Args:
        tasks: the task source; its ``contexts(n, seed)`` must be deterministic in the seed (no global RNG).
        contexts_per_step: contexts per step over all ranks (each gets ``group_size`` rollouts); under a
            data-parallel strategy it must be a multiple of the world size, and each rank rolls out its share.
        seed: stream seed; batch ``i`` uses ``seed * 1_000_003 + i``.
    """

    def __init__(self, tasks, contexts_per_step: int = 4, seed: int = 0) -> None:
        super().__init__()
        if not callable(getattr(tasks, "contexts", None)):
            raise TypeError(f"the task source needs a contexts(n, seed) method, got {type(tasks).__name__}")
        if contexts_per_step < 1:
            raise ConfigError(f"contexts_per_step must be >= 1, got {contexts_per_step}")
        self.tasks, self.contexts_per_step, self.seed = tasks, contexts_per_step, seed
        self.next_index = 0
        self._pending_rng: torch.Tensor | None = None
        self._pending_cuda_rng: list[torch.Tensor] | None = None

    def rank_share(self) -> tuple[int, int]:
        """(this process's rank, ranks in all) under the attached trainer's strategy; (0, 1) without a trainer."""
        trainer = self.trainer
        if trainer is None:
            return 0, 1
        rank, world = trainer.global_rank, trainer.world_size
        if self.contexts_per_step % world:
            raise ConfigError(
                f"data.init_args.contexts_per_step ({self.contexts_per_step}) must be a multiple of the number of "
                f"processes ({world}: devices x nodes) so that every rank rolls out whole groups of the same count"
            )
        return rank, world

    def batch_at(self, index: int) -> ContextBatch:
        """Batch ``index`` of the stream: this rank's contiguous share of the global ``contexts_per_step``."""
        contexts = self.tasks.contexts(self.contexts_per_step, self.seed * 1_000_003 + index)
        if len(contexts) != self.contexts_per_step:
            raise ValueError(f"contexts() returned {len(contexts)} contexts, expected {self.contexts_per_step}")
        rank, world = self.rank_share()
        share = self.contexts_per_step // world
        return ContextBatch(index=index, contexts=contexts[rank * share : (rank + 1) * share])

    def train_dataloader(self) -> _ContextStream:
        self.rank_share()  # a batch that does not split over the ranks fails before the first rollout
        return _ContextStream(self)

    def on_before_rollout(self, batch: ContextBatch) -> None:
        """Called by the trainer as a step starts: marks the batch consumed and, after a resume, restores the RNG.

        (The loop prefetches batches, so the cursor cannot be advanced by the iterator itself.)
        """
        self.next_index = batch.index + 1
        if self._pending_rng is not None:
            torch.set_rng_state(self._pending_rng)
            self._pending_rng = None
        if self._pending_cuda_rng is not None:
            set_cuda_rng(self._pending_cuda_rng)
            self._pending_cuda_rng = None

    def state_dict(self) -> dict[str, Any]:
        """The cursor and the RNG states: this rank's as ``torch_rng``/``cuda_rng``, and under a data-parallel
        strategy every rank's as ``rank_rngs`` (gathered: Lightning builds the checkpoint on every rank and writes
        rank 0's)."""
        own = {"torch_rng": torch.get_rng_state(), "cuda_rng": get_cuda_rng()}
        state = {"next_index": self.next_index, **own}
        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            gathered: list[Any] = [None] * dist.get_world_size()
            dist.all_gather_object(gathered, own)
            state["rank_rngs"] = gathered
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.next_index = int(state_dict["next_index"])
        by_rank = state_dict.get("rank_rngs") or [state_dict]
        rank, world = self.rank_share()
        own = by_rank[rank] if len(by_rank) == world else by_rank[0]
        if len(by_rank) != world:
            warnings.warn(
                f"the checkpoint was written by {len(by_rank)} process(es), this run has {world}: the stream continues "
                "at the right batch, but the resumed run will not sample exactly what the uninterrupted one would have",
                stacklevel=2,
            )
        self._pending_rng = own.get("torch_rng")
        self._pending_cuda_rng = own.get("cuda_rng")


def get_cuda_rng() -> list[torch.Tensor] | None:
    """Every CUDA device's RNG state, or None when CUDA is not in use (nothing to save; no CUDA context is made)."""
    if not (torch.cuda.is_available() and torch.cuda.is_initialized()):
        return None
    return torch.cuda.get_rng_state_all()


def set_cuda_rng(states: list[torch.Tensor]) -> None:
    """Restore ``get_cuda_rng``'s states, device by device; without CUDA (or with fewer devices) the missing ones are
    skipped with a warning: the resume is then not sample-exact."""
    have = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if have < len(states):
        warnings.warn(
            f"the checkpoint holds CUDA RNG states of {len(states)} device(s), this machine has {have}: the resumed "
            "run will not sample exactly what the uninterrupted one would have",
            stacklevel=2,
        )
    for device, state in enumerate(states[:have]):
        torch.cuda.set_rng_state(state, device)
