"""Solver trials: run a solver engine n times on each task and grade the answers with the domain.

Shared by labeling, evaluation and adversarial probe mining, so a task's solve count means the same everywhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from propel.domains.base import Domain, Task
from propel.engines.base import Engine, SamplingSpec


@dataclass
class Trials:
    """One task's graded solver attempts."""

    grades: list[bool]
    tokens: int  # solver tokens generated over all attempts

    @property
    def solve_count(self) -> int:
        return sum(self.grades)


def in_band(solve_count: int, band: tuple[int, int]) -> bool:
    """Whether a solve count lies in the inclusive utility band ``(lo, hi)``."""
    return band[0] <= solve_count <= band[1]


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
