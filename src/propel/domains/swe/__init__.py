"""The SWE domain (the PROPEL paper's §4.2 and App. 13): bugs injected into real Python repositories, judged strictly.

``repos`` (registry of small pure-Python libraries, sdists pinned by hash) -> ``checkout`` (clean git checkouts,
cached) -> ``prepare`` (preflight: passing tests, flaky ones dropped) -> ``validity`` (``BugValidator``: applies,
tests untouched, suite runs, at least one passing test fails; repairs graded by the full suite) with ``suite``
(the repo's pytest run in a sandbox) and ``diffs`` (``git apply`` on a copy). ``mutations``/``baseline`` are the
procedural bug generator; ``tool_episodes``/``prompts`` turn generator and solver tasks into ``ToolEnv`` episodes;
``domain`` (``SweDomain``) wires bugs into labeling pools, labeled by repair episodes.
"""

import importlib

from propel.domains.swe.repos import REPOS, SPLITS, RepoProfile, get_repo

_LAZY = {  # imported on first use: ``python -m propel.domains.swe.prepare`` must not find prepare imported already
    "Manifest": "prepare",
    "load_manifest": "prepare",
    "REASONS": "validity",
    "BugValidator": "validity",
    "BugVerdict": "validity",
    "RepairVerdict": "validity",
    "REPAIR_REASONS": "validity",
    "SweDomain": "domain",
    "bug_record": "domain",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(f"propel.domains.swe.{_LAZY[name]}"), name)
    raise AttributeError(name)


__all__ = [
    "REASONS",
    "REPAIR_REASONS",
    "REPOS",
    "SPLITS",
    "BugValidator",
    "BugVerdict",
    "Manifest",
    "RepairVerdict",
    "RepoProfile",
    "SweDomain",
    "bug_record",
    "get_repo",
    "load_manifest",
]
