"""Tasks for OpenEnv environments: an OpenEnv environment owns its data and draws an episode from its reset seed, so
a propel task is a seed (and fixed reset arguments), deterministic in the stream's seed as ``Domain.contexts`` is."""

from __future__ import annotations

import random
from typing import Any

from propel.errors import ConfigError
from propel.records import Context, Prompt, TaskSource


class OpenEnvTasks(TaskSource):
    """``contexts(n, seed)``: ``n`` reset seeds for ``OpenEnvAgentEnv`` (a GRPO group shares one: the same episode).

    Args:
        instruction: a user message opening each conversation before the first observation ("" for none).
        seeds: draw from these reset seeds; None draws fresh ones below ``max_seed``.
        max_seed: bound of the drawn seeds (OpenEnv's reset takes a seed >= 0).
        reset_kwargs: further arguments of every ``reset`` (an environment's task name, difficulty, split); those
            its signature does not name are dropped, as OpenEnv's server drops them.
    """

    def __init__(
        self,
        instruction: str = "",
        seeds: list[int] | None = None,
        max_seed: int = 2**31 - 1,
        reset_kwargs: dict[str, Any] | None = None,
    ) -> None:
        if seeds is not None and (not seeds or min(seeds) < 0):
            raise ConfigError(f"OpenEnvTasks seeds must be a non-empty list of integers >= 0, got {seeds}")
        if max_seed < 1:
            raise ConfigError(f"OpenEnvTasks max_seed must be >= 1, got {max_seed}")
        self.instruction, self.seeds, self.max_seed = instruction, seeds, max_seed
        self.reset_kwargs = dict(reset_kwargs or {})

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        rng = random.Random(seed)
        drawn = [rng.choice(self.seeds) if self.seeds else rng.randrange(self.max_seed) for _ in range(n)]
        messages = [{"role": "user", "content": self.instruction}] if self.instruction else []
        return [
            Context(
                id=f"openenv-{s}",
                prompt=Prompt(messages=list(messages)),
                group=str(s),
                data={"seed": s, "reset_kwargs": dict(self.reset_kwargs)},
            )
            for s in drawn
        ]
