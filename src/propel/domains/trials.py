"""Solver trials: run a solver engine n times on each task and grade the answers with the domain.

Shared by labeling, evaluation and adversarial probe mining, so a task's solve count means the same everywhere;
``SolverSpec`` is the one declaration of the trial settings they all take.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from propel.domains.interface import Domain
from propel.engines.engine import Engine, SamplingSpec
from propel.errors import ConfigError
from propel.records import Task


def in_band(solve_count: int, band: tuple[int, int]) -> bool:
    """Whether a solve count lies in the inclusive utility band ``(lo, hi)``."""
    return band[0] <= solve_count <= band[1]


@dataclass
class SolverSpec:
    """Who solves the tasks and how often: the settings behind every solve count and utility label."""

    model: str | None = None
    """Solver model (bundled alias, folder or hub id); None uses the generator's base model."""
    n_trials: int = 8
    """Solver attempts per valid task."""
    band: tuple[int, int] = (1, 3)
    """Inclusive solve-count band that makes a task positive (useful to the solver): 1..3 of 8 by default."""
    max_new_tokens: int = 256
    """Token budget of one attempt."""
    temperature: float = 1.0
    """Sampling temperature of the attempts."""
    top_p: float = 1.0
    """Nucleus sampling of the attempts."""

    def __post_init__(self) -> None:
        self.band = (int(self.band[0]), int(self.band[1]))
        if self.n_trials < 1:
            raise ConfigError(f"solver.n_trials must be >= 1, got {self.n_trials}")
        if not 0 <= self.band[0] <= self.band[1] <= self.n_trials:
            raise ConfigError(f"solver.band must satisfy 0 <= lo <= hi <= n_trials={self.n_trials}, got {self.band}")
        if self.max_new_tokens < 1:
            raise ConfigError(f"solver.max_new_tokens must be >= 1, got {self.max_new_tokens}")

    def sampling(self, stop: Sequence[str] = ()) -> SamplingSpec:
        """The engine's sampling settings for one task's ``n_trials`` attempts."""
        return SamplingSpec(
            n=self.n_trials,
            max_new_tokens=self.max_new_tokens,
            temperature=self.temperature,
            top_p=self.top_p,
            stop=list(stop),
        )


@dataclass
class Trials:
    """One task's graded solver attempts."""

    grades: list[bool]
    tokens: int  # solver tokens generated over all attempts

    @property
    def solve_count(self) -> int:
        return sum(self.grades)

    def in_band(self, band: tuple[int, int]) -> bool:
        return in_band(self.solve_count, band)


def solver_trials(
    domain: Domain, engine: Engine, tasks: Sequence[Task], spec: SamplingSpec, sandbox=None
) -> list[Trials]:
    """``spec.n`` attempts per task in one engine call, each graded by ``domain.grade``."""
    if not tasks:
        return []
    attempts = engine.generate([domain.solver_prompt(t) for t in tasks], spec)
    out = []
    for task, outs in zip(tasks, attempts, strict=True):
        grades = [bool(g) for g in domain.grade(task, [o.text for o in outs], sandbox)]
        out.append(Trials(grades, sum(len(o.token_ids) for o in outs)))
    return out
