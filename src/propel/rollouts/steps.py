"""What one RL step consumes (a batch of contexts with its position in the stream) and who supplies it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from propel.domains.base import Context
from propel.engines.base import Prompt
from propel.rollouts.environment import Environment


@dataclass
class ContextBatch:
    """The contexts of one RL step (ids, groups and gold data kept) and the position of that step in the stream."""

    index: int
    contexts: list[Context]

    @property
    def prompts(self) -> list[Prompt]:
        return [c.prompt for c in self.contexts]


@runtime_checkable
class RolloutSource(Protocol):
    """What an RL datamodule declares to its trainer: the environment that scores its contexts' rollouts, and a
    call as each step starts (it marks the batch consumed and restores the RNG after a resume)."""

    @property
    def environment(self) -> Environment: ...

    def on_before_rollout(self, batch: ContextBatch) -> None: ...
