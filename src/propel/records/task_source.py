"""What a task source is: ``contexts(n, seed)`` of graded problems, deterministic in the seed (the
``Domain.contexts`` contract), each context's ``data`` holding what grading needs (tests, gold steps, an oracle) and,
for agents, what their environment needs (files, and the check as data: ``propel.envs.verdict``)."""

from __future__ import annotations

from abc import ABC, abstractmethod

from propel.records.context import Context


class TaskSource(ABC):
    """Where tasks come from. Subclass it and implement ``contexts``."""

    @abstractmethod
    def contexts(self, n: int, seed: int = 0) -> list[Context]: ...
