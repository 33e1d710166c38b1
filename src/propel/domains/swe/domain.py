"""The SWE domain as a labeling domain: bugs (diffs) in real repos, checked strictly, labeled by repair episodes.

A task is a bug record ``{"repo", "diff"}`` (JSON; the generator's "completion"). Its bugs come written before the
run, so every context carries its completion (``Context.data["completion"]``; ``LabelingModule`` uses it instead of
sampling): candidates from the procedural generator (``mutations.generate_bugs``: seed tasks, no model needed) and
the diffs of generator episodes recorded in a JSON-lines file (``episodes``: one ``{"id", "repo", "diff"}`` per
line, as ``bug_record`` writes them). ``validity`` is ``BugValidator.check_many`` (the per-file revert check
included); a valid task gets its fail-to-pass tests. Solver trials are repair episodes (``agent_context``: the buggy
checkout as a fresh ``ToolEnv`` workspace), graded by ``BugValidator.grade_repair`` on the diff of the files each
episode left (``agent_grade``): solved iff every previously passing test passes again and no hack detector fires.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from propel.domains.agents import SolvedByAgents, WritesInEpisodes
from propel.domains.interface import Domain, ParseFailure, Verdict
from propel.domains.swe.checkout import checkout
from propel.domains.swe.diffs import apply_diff
from propel.domains.swe.mutations import generate_bugs
from propel.domains.swe.prepare import load_manifest
from propel.domains.swe.repos import SPLITS, RepoProfile, get_repo
from propel.domains.swe.tool_episodes import (
    collected_files,
    episode_diff,
    generator_contexts,
    generator_prompt,
    solver_context,
)
from propel.domains.swe.validity import BugValidator, BugVerdict
from propel.errors import ConfigError
from propel.records import Context, Prompt, Task
from propel.sandbox.sandbox import Sandbox


def _bug(repo: str, diff: str, turns: Sequence[str] | None) -> dict[str, Any]:
    record: dict[str, Any] = {"repo": repo, "diff": diff}
    if turns is not None:
        record["turns"] = [str(t) for t in turns]
    return record


def _turns(value: Any) -> list[str] | None:
    """A record's ``turns`` when it is a list of strings, else None."""
    return value if isinstance(value, list) and all(isinstance(t, str) for t in value) else None


def bug_record(repo: str, diff: str, turns: Sequence[str] | None = None) -> str:
    """A bug as the domain's task text (what ``parse`` reads and the pool's ``completion`` column holds); ``turns``:
    the assistant turns of the generator episode that wrote it, what a trajectory probe reads."""
    return json.dumps(_bug(repo, diff, turns), sort_keys=True)


def resolve_repos(repos: str | Sequence[str]) -> list[str]:
    """Repo names from a split name of ``SPLITS`` (``probe_train``, ``rl_train``, ``eval``) or a list of names."""
    if isinstance(repos, str):
        names = list(SPLITS.get(repos, (repos,)))
    else:
        names = list(repos)
    for name in names:
        try:
            get_repo(name)
        except KeyError as e:
            raise ConfigError(f"domain.repos: {e.args[0]} (or a split: {', '.join(SPLITS)})") from None
    return names


def episode_bug(context: Context, collected: dict[str, str | None], turns: Sequence[str] | None = None) -> str:
    """One line of an ``episodes`` file from a finished generator episode (``tool_episodes.generator_context``): its id,
    repo, the diff of the library files it left (``Sample.artifacts["files"]``) and, given, its assistant turns."""
    record = _bug(context.data["repo"], episode_diff(context, collected), turns)
    return json.dumps({"id": context.id, **record}, sort_keys=True)


class SweDomain(Domain, SolvedByAgents, WritesInEpisodes):
    """Bugs in the shipped repos, labeled by repair episodes (``LabelingModule(solver_agent=AgentSolver(ToolEnv))``).

    Args:
        repos: a split of ``propel.domains.swe.repos.SPLITS`` (repo-disjoint: ``probe_train``, ``rl_train``,
            ``eval``) or repo names.
        procedural: take candidate bugs from the procedural generator (round-robin over the repos).
        episodes: a JSON-lines file of generator-episode bugs (``{"id", "repo", "diff"}`` per line, and the
            episode's assistant ``turns`` for trajectory probes); its bugs come before the procedural ones, in file
            order. Lines naming a repo outside ``repos`` are skipped.
        batch_size: bugs per sandbox job when checking validity.
        timeout_factor: a suite run may take this many times the clean run (``BugValidator``).
        generate: the contexts are bug-injection episodes on clean checkouts instead (``episodes.generator_contexts``),
            for a generator agent to write the bugs (``LabelingModule(generator_agent=...)``: evaluation of a base or
            trained generator); needs ``procedural: false`` and no ``episodes`` file.
        allow_untrusted: keep bugs whose repairs cannot be graded out of process (``BugValidator``): they are valid
            and their repairs are graded by the suite alone, whose verdict the repair's code can reach. Off by
            default: such bugs are invalid (``untrusted``), and their share is the pool's invalid-reason count.
    """

    name = "swe"

    def __init__(
        self,
        repos: str | list[str] = "probe_train",
        procedural: bool = True,
        episodes: str | None = None,
        batch_size: int = 4,
        timeout_factor: float = 10.0,
        generate: bool = False,
        allow_untrusted: bool = False,
    ) -> None:
        self.repos = resolve_repos(repos)
        if generate and (procedural or episodes is not None):
            raise ConfigError(
                "domain: generate=true takes its bugs from a generator agent; set procedural=false and no episodes file"
            )
        if not (procedural or generate) and episodes is None:
            raise ConfigError("domain: set procedural=true, an episodes file or generate=true, or there are no bugs")
        self.generate = generate
        self.procedural, self.episodes = procedural, episodes
        self.batch_size, self.timeout_factor, self.allow_untrusted = batch_size, timeout_factor, allow_untrusted
        self.repair_reasons: Counter = Counter()
        """Why graded repairs were not solved (``REPAIR_REASONS``), over this domain's lifetime."""
        self._validators: dict[tuple[str, int], BugValidator] = {}

    # contexts ---------------------------------------------------------------------------------------------------
    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        """Up to ``n`` bug contexts: the episode file's first, then procedural candidates round-robin over the repos
        (ids ``swe-<seed>-<repo>-<i>``; candidates for a larger ``n`` extend those for a smaller one); with
        ``generate``, bug-injection episodes on clean checkouts."""
        if self.generate:
            return generator_contexts(self.repos, n, seed)
        out = self._episode_contexts()[:n]
        if self.procedural and len(out) < n:
            per_repo = -(-(n - len(out)) // len(self.repos))
            lists = [self._procedural(name, per_repo, seed) for name in self.repos]
            for i in range(per_repo):
                out.extend(items[i] for items in lists if i < len(items))
        return out[:n]

    def _procedural(self, repo: str, n: int, seed: int) -> list[Context]:
        profile = get_repo(repo)
        bugs = generate_bugs(profile, checkout(profile), n, seed=seed)
        return [
            self._context(f"swe-{seed}-{repo}-{i}", profile, bug.diff, "procedural", transform=bug.transform)
            for i, bug in enumerate(bugs)
        ]

    def _episode_contexts(self) -> list[Context]:
        if self.episodes is None:
            return []
        path = Path(self.episodes)
        if not path.is_file():
            raise ConfigError(f"domain.episodes: no file {path} (JSON lines of {{id, repo, diff}})")
        out = []
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                rid, repo, diff = str(record["id"]), str(record["repo"]), str(record["diff"])
                turns = record.get("turns")
                if turns is not None and _turns(turns) is None:
                    raise TypeError("turns must be a list of strings")
            except (ValueError, KeyError, TypeError) as e:
                raise ConfigError(f"domain.episodes: line {number} of {path} is not {{id, repo, diff}}: {e}") from None
            if repo in self.repos:
                out.append(self._context(f"swe-episode-{rid}", get_repo(repo), diff, "episode", turns=turns))
        return out

    def _context(
        self, cid: str, profile: RepoProfile, diff: str, source: str, turns: list[str] | None = None, **extra: Any
    ) -> Context:
        """A bug's context: the generator's prompt for its repo, the bug as the ready completion."""
        text = generator_prompt(profile)
        data = {"completion": bug_record(profile.name, diff, turns), "source": source, **extra}
        prompt = Prompt(messages=[{"role": "user", "content": text}])
        return Context(id=cid, prompt=prompt, group=profile.name, data=data)

    # tasks ------------------------------------------------------------------------------------------------------
    def parse(self, completion: str) -> Task | ParseFailure:
        try:
            record = json.loads(completion)
        except ValueError:
            return ParseFailure("not_a_bug_record")
        if not isinstance(record, dict) or not isinstance(record.get("diff"), str):
            return ParseFailure("not_a_bug_record")
        if record.get("repo") not in self.repos:
            return ParseFailure("unknown_repo")
        data = {"repo": record["repo"], "diff": record["diff"]}
        turns = _turns(record.get("turns"))
        if turns:
            data["turns"] = turns
        return Task(domain=self.name, data=data)

    def validity(self, tasks: Sequence[Task], sandbox: Sandbox) -> list[Verdict]:
        """``BugValidator`` per repo (batched); a valid task gets ``failing`` (its fail-to-pass tests) and
        ``changed``; every task gets ``detail`` (the verdict's line)."""
        verdicts: list[Verdict | None] = [None] * len(tasks)
        for repo in dict.fromkeys(t.data["repo"] for t in tasks):
            idx = [i for i, t in enumerate(tasks) if t.data["repo"] == repo]
            checked = self.validator(repo, sandbox).check_many([tasks[i].data["diff"] for i in idx])
            for i, bug in zip(idx, checked, strict=True):
                tasks[i].data.update(detail=bug.detail, changed=list(bug.changed))
                if bug.valid:
                    tasks[i].data.update(failing=list(bug.failing), targets=list(bug.targets), trusted=bug.trusted)
                verdicts[i] = Verdict(bug.valid, "ok" if bug.valid else str(bug.reason))
        return verdicts  # type: ignore[return-value]

    def validator(self, repo: str, sandbox: Sandbox) -> BugValidator:
        """The repo's validator on ``sandbox`` (built once; the manifest is preflighted on first use)."""
        key = (repo, id(sandbox))
        if key not in self._validators:
            profile = get_repo(repo)
            self._validators[key] = BugValidator(
                profile,
                checkout(profile),
                sandbox,
                manifest=load_manifest(profile, sandbox),
                batch_size=self.batch_size,
                timeout_factor=self.timeout_factor,
                allow_untrusted=self.allow_untrusted,
            )
        return self._validators[key]

    def bug(self, task: Task) -> BugVerdict:
        """A valid task as the verdict ``grade_repair`` lays repairs over (the buggy files rebuilt from the diff)."""
        files = dict(_bug_files(task.data["repo"], task.data["diff"]))
        targets, trusted = tuple(task.data.get("targets") or ()), bool(task.data.get("trusted"))
        return BugVerdict(True, failing=tuple(task.data["failing"]), files=files, targets=targets, trusted=trusted)

    # solving ----------------------------------------------------------------------------------------------------
    def solver_prompt(self, task: Task) -> Prompt:
        return self.agent_context(task, "prompt").prompt

    def agent_context(self, task: Task, task_id: str) -> Context:
        """A repair episode: the buggy checkout as the workspace, the failing tests in the prompt."""
        profile = get_repo(task.data["repo"])
        ctx = solver_context(profile, checkout(profile), self.bug(task).files, task.data["failing"])
        ctx.id = task_id
        return ctx

    def grade(self, task: Task, completions: Sequence[str], sandbox: Sandbox) -> list[bool]:
        """Single-turn solvers: each completion is a repair diff against the buggy tree."""
        return self._grade(task, list(completions), sandbox)

    def agent_grade(self, task: Task, artifacts: Sequence[dict[str, Any]], sandbox: Sandbox | None) -> list[bool]:
        """Repair episodes: the diff of the library files each episode left, graded by ``grade_repair``; a cut
        collection raises ``TruncatedCollection`` (never a diff)."""
        files = [collected_files(a) for a in artifacts]
        start = self.agent_context(task, "grade")
        return self._grade(task, [episode_diff(start, f) for f in files], sandbox)

    def _grade(self, task: Task, repairs: list[str], sandbox: Sandbox | None) -> list[bool]:
        if sandbox is None:
            raise RuntimeError("SweDomain grades repairs by running the suite: it needs a sandbox")
        validator, bug = self.validator(task.data["repo"], sandbox), self.bug(task)
        out = []
        for repair in repairs:
            verdict = validator.grade_repair(bug, repair)
            if not verdict.solved:
                self.repair_reasons[verdict.reason] += 1
            out.append(verdict.solved)
        return out

    def topic(self, task: Task) -> str:
        changed = task.data.get("changed") or ["?"]
        return f"{task.data['repo']}:{changed[0]}"

    def task_metrics(self, task: Task) -> dict[str, float]:
        """A valid bug's size (lines its diff adds or removes) and the previously passing tests it makes fail."""
        lines = [ln for ln in task.data["diff"].splitlines() if ln[:1] in "+-" and ln[:3] not in ("+++", "---")]
        return {"diff_lines": float(len(lines)), "failing_tests": float(len(task.data.get("failing") or ()))}

    def render(self, task: Task) -> str:
        """The bug's diff (what diversity metrics read)."""
        return task.data["diff"]

    def probe_input(self, task: Task) -> list[str]:
        """A trajectory: the assistant turns of the generator episode that wrote the bug; a bug written without an
        episode (procedural) is the one-turn trajectory of its diff."""
        return list(task.data.get("turns") or [task.data["diff"]])

    def episode_completion(self, context: Context, artifacts: dict[str, Any], turns: Sequence[str] = ()) -> str:
        """A generator episode's bug: the diff of the library files it left, against its clean checkout, with the
        episode's assistant turns (what the trajectory probe reads); a cut collection raises ``TruncatedCollection``."""
        diff = episode_diff(context, collected_files(artifacts))
        return bug_record(context.data["repo"], diff, list(turns) or None)


@lru_cache(maxsize=256)
def _bug_files(repo: str, diff: str) -> dict[str, bytes | None]:
    applied = apply_diff(checkout(get_repo(repo)), diff)
    if not applied.ok:
        raise ValueError(f"a valid {repo} bug no longer applies to its checkout: {applied.error}")
    return applied.files
