"""What one RL step consumes (a batch of contexts with its position in the stream), what it produces (a
``Rollout``: groups of scored samples and where the time went) and who supplies both (``RolloutSource``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from propel.engines.engine import Engine, SamplingSpec
from propel.records import Context, Prompt, Sample


@dataclass
class ContextBatch:
    """The contexts of one RL step (ids, groups and gold data kept) and the position of that step in the stream."""

    index: int
    contexts: list[Context]

    @property
    def prompts(self) -> list[Prompt]:
        return [c.prompt for c in self.contexts]


@dataclass
class Rollout:
    """One step's scored rollouts: ``sampling.n`` samples per context, in context order, and timings in seconds
    (``generation_s`` inside the engine, ``environment_s`` scoring / tool calls, ``wall_s`` in all)."""

    groups: list[list[Sample]]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def samples(self) -> list[Sample]:
        return [s for group in self.groups for s in group]


@runtime_checkable
class RolloutSource(Protocol):
    """What an RL datamodule declares to its trainer: the stop strings of its scorer or agent environment, a call as
    each step starts (it marks the batch consumed and restores the RNG after a resume) and the rollout itself
    (single-turn completions scored in a batch, or multi-turn agent episodes)."""

    @property
    def stop(self) -> tuple[str, ...]: ...

    def on_before_rollout(self, batch: ContextBatch) -> None: ...

    def rollout(self, engine: Engine, batch: ContextBatch, sampling: SamplingSpec) -> Rollout: ...
