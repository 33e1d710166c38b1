"""SWE tasks as ``ToolEnv`` episodes: a generator episode injects a bug, a solver episode repairs it.

A context carries the checkout's files (the clean one for the generator, the buggy one for a solver) as the
workspace's starting files and asks the environment to collect the code under test when the episode ends; the
episode's diff is then rebuilt in the trainer by comparing those files with what the workspace started from. No git
is needed inside the sandbox, so the same episodes run under bubblewrap and in the bare ``propel-sandbox:py3``
image. The diff goes to ``BugValidator.check`` (generator) or ``BugValidator.grade_repair`` (solver).
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping, Sequence

from propel.domains.swe.checkout import checkout, repo_files
from propel.domains.swe.diffs import unified_diff
from propel.domains.swe.prompts import GENERATOR_PROMPT, SOLVER_PROMPT
from propel.domains.swe.repos import RepoProfile, get_repo
from propel.errors import PropelError
from propel.records import Context, Prompt
from propel.testsuite.vendor import ZIP_NAME, testlib_zip

MAX_FAILING_SHOWN = 10
"""Failing test ids listed in a solver's prompt (the rest are summarised)."""


class TruncatedCollection(PropelError):
    """An episode's collected files were cut (``ToolEnv`` ``max_collect_chars``): they are not the workspace, so no
    diff, bug or grade may be made of them (the episode is an infrastructure failure, not the policy's doing)."""


def collected_files(artifacts: Mapping) -> Mapping[str, str | None]:
    """The files an episode left (``Sample.artifacts["files"]``), refusing a collection the environment cut."""
    cut = (artifacts.get("verifier") or {}).get("collect_truncated")
    if cut:
        raise TruncatedCollection(
            f"the episode's collected files were cut ({', '.join(map(str, cut))}): a diff of them would delete what "
            "was cut; raise ToolEnv max_collect_chars"
        )
    return artifacts.get("files") or {}


def suite_command(profile: RepoProfile) -> str:
    """The shell command an agent runs to see the suite (pytest comes from the vendored zip in the workspace)."""
    path = ":".join([ZIP_NAME, *profile.python_path])
    return f"PYTHONPATH={path} python3 -m pytest -q -p no:cacheprovider {' '.join(profile.test_paths)}"


def _workspace(profile: RepoProfile, root: str | os.PathLike, variant: Mapping[str, bytes | None] | None) -> dict:
    files: dict = {**repo_files(root), ZIP_NAME: testlib_zip()}
    for name, data in (variant or {}).items():
        if data is None:
            files.pop(name, None)
        else:
            files[name] = data
    return files


def _collect(profile: RepoProfile, files: Mapping[str, bytes]) -> list[str]:
    return sorted({*(p for p in files if profile.is_source_path(p)), *profile.source_globs})


def _context(context_id: str, profile: RepoProfile, text: str, files: Mapping[str, bytes]) -> Context:
    """An episode's context: the prompt as one user message, the workspace files, and what to collect at the end."""
    return Context(
        id=context_id,
        prompt=Prompt(messages=[{"role": "user", "content": text}]),
        group=profile.name,
        data={"repo": profile.name, "files": files, "collect": _collect(profile, files), "collect_whole": True},
    )


def generator_prompt(profile: RepoProfile) -> str:
    """The bug-injection instructions for ``profile``'s repository (its sources, tests and suite command)."""
    return GENERATOR_PROMPT.format(
        repo=profile.name,
        version=profile.version,
        sources=", ".join(profile.source_globs),
        tests=", ".join(profile.test_paths),
        command=suite_command(profile),
    )


def generator_context(profile: RepoProfile, root: str | os.PathLike, index: int = 0) -> Context:
    """A bug-injection episode on the clean checkout (``index`` tells contexts of the same repo apart)."""
    files = _workspace(profile, root, None)
    return _context(f"swe-gen-{profile.key}-{index}", profile, generator_prompt(profile), files)


def generator_contexts(repos: Sequence[str], n: int, seed: int = 0) -> list[Context]:
    """``n`` bug-injection episodes on clean checkouts of repos drawn from ``repos`` (seeded; ids
    ``swe-gen-<seed>-<repo>-<i>``): the generator's tasks in RL and in evaluation."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        profile = get_repo(rng.choice(list(repos)))
        context = generator_context(profile, checkout(profile), index=i)
        context.id = f"swe-gen-{seed}-{profile.name}-{i}"
        out.append(context)
    return out


def solver_context(
    profile: RepoProfile,
    root: str | os.PathLike,
    bug_files: Mapping[str, bytes | None],
    failing: list[str] | tuple[str, ...],
    index: int = 0,
) -> Context:
    """A repair episode on the buggy checkout (``bug_files``: the bug's variant, e.g. ``BugVerdict.files``)."""
    files = _workspace(profile, root, bug_files)
    shown = [f"- {name}" for name in list(failing)[:MAX_FAILING_SHOWN]]
    if len(failing) > MAX_FAILING_SHOWN:
        shown.append(f"- ... and {len(failing) - MAX_FAILING_SHOWN} more")
    text = SOLVER_PROMPT.format(
        repo=profile.name,
        version=profile.version,
        failing="\n".join(shown),
        tests=", ".join(profile.test_paths),
        command=suite_command(profile),
    )
    return _context(f"swe-fix-{profile.key}-{index}", profile, text, files)


def episode_diff(context: Context, collected: Mapping[str, str | None]) -> str:
    """The diff of what the episode changed in the collected files, against the files it started with.

    A collected path that is missing or unreadable at the end (``None``) is left out: deleting the code under test
    is not a bug a suite could still run with, and an unreadable file says nothing.
    """
    start: Mapping[str, bytes] = context.data["files"]
    parts = []
    for path in sorted(collected):
        after = collected[path]
        if after is None:
            continue
        before = start.get(path)
        before_text = before.decode("utf-8", "replace") if isinstance(before, bytes) else (before or "")
        parts.append(unified_diff(path, before_text, after, new_file=before is None))
    return "".join(parts)
