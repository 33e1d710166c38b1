"""Bug-injection episodes for the SWE generator's RL: clean checkouts of real repos as ``ToolEnv`` workspaces."""

from __future__ import annotations

from propel.domains.swe.domain import resolve_repos
from propel.domains.swe.tool_episodes import generator_contexts
from propel.records import Context, TaskSource


class BugInjectionTasks(TaskSource):
    """Generator episodes (``EpisodeDataModule(tasks=..., domain=SweDomain(...))``): each context is the clean
    checkout of a repo drawn from ``repos`` (seeded), with the bug-injection prompt (``episodes.generator_contexts``).

    Args:
        repos: a split of ``propel.domains.swe.repos.SPLITS`` (``rl_train`` by default: disjoint from the probe's and
            the evaluation's repos) or repo names.
    """

    def __init__(self, repos: str | list[str] = "rl_train") -> None:
        self.repos = resolve_repos(repos)

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        return generator_contexts(self.repos, n, seed)
