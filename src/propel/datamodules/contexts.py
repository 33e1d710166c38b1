"""An unbounded, resumable stream of contexts for online RL (GRPO), and the environment that scores their rollouts.

Each training step takes one ``ContextBatch``: ``contexts_per_step`` contexts from the domain, drawn with a seed
derived from (``seed``, batch index) so the stream is reproducible. The DataModule's ``state_dict`` holds the next
batch index and the global torch RNG (which HF sampling and LoRA dropout draw from), captured at the step
boundary; a resumed run therefore samples exactly what an uninterrupted run would have.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import lightning.pytorch as pl
import torch

from propel.domains.base import Domain
from propel.errors import ConfigError
from propel.rollouts.environment import Environment, GeneratorEnv
from propel.rollouts.steps import ContextBatch
from propel.sandbox.base import Sandbox


class _ContextStream:
    def __init__(self, datamodule: ContextDataModule) -> None:
        self.dm = datamodule

    def __iter__(self) -> Iterator[ContextBatch]:
        index = self.dm.next_index
        while True:
            yield self.dm.batch_at(index)
            index += 1


class ContextDataModule(pl.LightningDataModule):
    """Generator contexts for GRPO, one batch per optimizer step, scored by a ``GeneratorEnv`` over the domain.

    A ``propel.rollouts.RolloutSource``: trainers read ``environment`` and call ``on_before_rollout``. The
    environment's sandbox is started when fitting starts and stopped when it ends.

    Args:
        domain: the task domain (``class_path`` in YAML); its ``contexts(n, seed)`` must be deterministic in
            the seed (no global RNG).
        contexts_per_step: contexts per step (each gets ``group_size`` completions).
        seed: stream seed; batch ``i`` uses ``seed * 1_000_003 + i``.
        sandbox: verifier sandbox for the domain's validity checks; None starts a ``LocalSandbox`` when the domain
            needs one.
    """

    def __init__(
        self, domain: Domain, contexts_per_step: int = 4, seed: int = 0, sandbox: Sandbox | None = None
    ) -> None:
        super().__init__()
        if not isinstance(domain, Domain):
            raise TypeError(f"data.domain must be a propel.domains.base.Domain, got {type(domain).__name__}")
        if contexts_per_step < 1:
            raise ConfigError(f"contexts_per_step must be >= 1, got {contexts_per_step}")
        self.domain, self.contexts_per_step, self.seed = domain, contexts_per_step, seed
        self._environment = GeneratorEnv(domain, sandbox)
        self.next_index = 0
        self._pending_rng: torch.Tensor | None = None

    @property
    def environment(self) -> Environment:
        return self._environment

    def setup(self, stage: str) -> None:
        if stage == "fit":
            self._environment.open()

    def teardown(self, stage: str) -> None:
        if stage == "fit":
            self._environment.close()

    def batch_at(self, index: int) -> ContextBatch:
        contexts = self.domain.contexts(self.contexts_per_step, self.seed * 1_000_003 + index)
        if len(contexts) != self.contexts_per_step:
            raise ValueError(f"domain.contexts returned {len(contexts)} contexts, expected {self.contexts_per_step}")
        return ContextBatch(index=index, contexts=contexts)

    def train_dataloader(self) -> _ContextStream:
        return _ContextStream(self)

    def on_before_rollout(self, batch: ContextBatch) -> None:
        """Called by the trainer as a step starts: marks the batch consumed and, after a resume, restores the RNG.

        (The loop prefetches batches, so the cursor cannot be advanced by the iterator itself.)
        """
        self.next_index = batch.index + 1
        if self._pending_rng is not None:
            torch.set_rng_state(self._pending_rng)
            self._pending_rng = None

    def state_dict(self) -> dict[str, Any]:
        return {"next_index": self.next_index, "torch_rng": torch.get_rng_state()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.next_index = int(state_dict["next_index"])
        self._pending_rng = state_dict.get("torch_rng")
