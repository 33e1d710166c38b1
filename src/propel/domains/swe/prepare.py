"""Preflight of the SWE repos: fetch, check out, run each suite twice on the clean commit, record the passing tests.

A test is in the manifest's ``passing`` set only if it passed explicitly in both runs; one that passed once is
``flaky`` and never counts for or against a bug. Manifests are cached next to the checkouts (one JSON per repo and
version) and rebuilt when missing or stale (another sdist hash)::

    python -m propel.domains.swe.prepare [--out DIR] [--repos parse,toolz] [--backend local|docker] [--fetch-only]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

from propel.domains.swe.checkout import checkout, git, swe_cache
from propel.domains.swe.repos import REPOS, RepoProfile, get_repo
from propel.domains.swe.suite import RUNNER_VERSION, RepoSuite
from propel.durable import write_text
from propel.errors import PropelError
from propel.sandbox import Sandbox, make_sandbox
from propel.testsuite.detectors import audit_baseline, run_findings

RUNS = 2
"""Suite runs on the clean commit; a test must pass in each to be in ``passing``."""


@dataclass
class Manifest:
    """A repo's clean state: its commit and the tests that pass there."""

    repo: str
    version: str
    sha256: str
    commit: str
    """The clean checkout's commit id (fixed author and date: the same on every machine)."""
    passing: list[str]
    """Test ids (``classname::name``) that passed in every preflight run."""
    flaky: list[str]
    """Tests that passed in some runs but not all (dropped: they decide nothing)."""
    counts: dict[str, int]
    """Outcome counts of the first run (``passed``, ``failed``, ``skipped``, ``error``)."""
    wall_s: float
    """Slowest run's wall time inside the sandbox."""
    audit: list[list[str]] = field(default_factory=list)
    """``(flag, event, detail)`` the clean code's own runs raise (audit findings, runner code the library itself
    rebinds, such as toolz putting its ``tlz`` finder on ``sys.meta_path``): a variant is judged on what it adds."""
    runner: int = 0
    """``suite.RUNNER_VERSION`` the manifest was made with (another version: rebuilt)."""

    def save(self, path: str | os.PathLike) -> None:
        write_text(path, json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike) -> Manifest:
        return cls(**json.loads(Path(path).read_text()))


class PreflightError(PropelError):
    """A repo's suite does not run cleanly in the sandbox (its profile or the environment needs fixing)."""


def preflight(profile: RepoProfile, sandbox: Sandbox, cache: str | os.PathLike | None = None) -> Manifest:
    """Run the suite ``RUNS`` times on the clean checkout and build its manifest (does not save it)."""
    root = checkout(profile, cache)
    runs = RepoSuite(profile, root, sandbox).run([{}] * RUNS)
    for run in runs:
        if not run.ok:
            raise PreflightError(f"{profile.key}: the clean suite did not run ({run.status}: {run.reason})")
        if run.forged:
            raise PreflightError(f"{profile.key}: the clean suite's result channel carried {run.forged} forged lines")
        claimed = {t for t, o in run.report_tests.items() if o == "passed"}
        if claimed != run.passed():
            shown = sorted(claimed ^ run.passed())[:3]
            raise PreflightError(f"{profile.key}: the run's own account and pytest's report disagree on {shown}")
    passed = [run.passed() for run in runs]
    stable = set.intersection(*passed)
    if not stable:
        raise PreflightError(f"{profile.key}: no test passes on the clean commit")
    commit = git(root, "rev-parse", "HEAD").stdout.decode().strip()
    return Manifest(
        repo=profile.name,
        version=profile.version,
        sha256=profile.sha256,
        commit=commit,
        passing=sorted(stable),
        flaky=sorted(set.union(*passed) - stable),
        counts=dict(Counter(runs[0].tests.values())),
        wall_s=max(run.wall_s for run in runs),
        audit=sorted(list(item) for item in audit_baseline(a for run in runs for a in run_findings(run))),
        runner=RUNNER_VERSION,
    )


def manifest_path(profile: RepoProfile, cache: str | os.PathLike | None = None) -> Path:
    path = swe_cache(cache) / "manifests" / f"{profile.key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def load_manifest(
    profile: RepoProfile, sandbox: Sandbox | None = None, cache: str | os.PathLike | None = None
) -> Manifest:
    """The cached manifest, or a fresh preflight (with ``sandbox``, else a local one) saved for next time.

    One process preflights a repo at a time (a file lock beside the manifest): the others wait and read its manifest,
    so every user of one cache grades against the same passing set (two preflights can differ in timings and flaky
    tests)."""
    from filelock import FileLock

    path = manifest_path(profile, cache)
    with FileLock(str(path) + ".lock"):
        if path.exists():
            manifest = Manifest.load(path)
            if manifest.sha256 == profile.sha256 and manifest.runner == RUNNER_VERSION:
                return manifest
        if sandbox is None:
            with make_sandbox("local") as local:
                manifest = preflight(profile, local, cache)
        else:
            manifest = preflight(profile, sandbox, cache)
        manifest.save(path)
    return manifest


def prepare(
    names: list[str] | None = None,
    backend: str = "local",
    cache: str | os.PathLike | None = None,
    force: bool = False,
    fetch_only: bool = False,
) -> dict[str, Manifest]:
    """Fetch, check out and preflight the named repos (all shipped ones by default); returns their manifests.

    ``fetch_only`` stops after the checkouts (the network part, for setup scripts); the preflight then runs on
    first use (``load_manifest``).
    """
    profiles = [get_repo(n) for n in names] if names else list(REPOS.values())
    out: dict[str, Manifest] = {}
    if fetch_only:
        for profile in profiles:
            print(f"{profile.key:22s} checked out at {checkout(profile, cache)}", flush=True)
        return out
    with make_sandbox(backend) as sandbox:
        for profile in profiles:
            start = time.monotonic()
            if force:
                manifest_path(profile, cache).unlink(missing_ok=True)
            manifest = load_manifest(profile, sandbox, cache)
            out[profile.name] = manifest
            print(
                f"{profile.key:22s} {len(manifest.passing):4d} passing, {len(manifest.flaky)} flaky, "
                f"{manifest.counts}  suite {manifest.wall_s:.1f}s  ({time.monotonic() - start:.1f}s)",
                flush=True,
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m propel.domains.swe.prepare", description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=None, help="cache folder (default: <PROPEL_CACHE or ~/.cache/propel>/swe)")
    parser.add_argument("--repos", default="", help="comma-separated repo names (default: all shipped repos)")
    parser.add_argument("--backend", default="local", choices=("local", "docker"), help="sandbox for the preflight")
    parser.add_argument("--force", action="store_true", help="rerun the preflight even when a manifest is cached")
    parser.add_argument("--fetch-only", action="store_true", help="fetch and check out only (no preflight)")
    args = parser.parse_args(argv)
    names = [n for n in args.repos.split(",") if n] or None
    try:
        prepare(names, args.backend, args.out, args.force, args.fetch_only)
    except (PropelError, KeyError) as e:
        print(f"error: {e.args[0] if isinstance(e, KeyError) else e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
