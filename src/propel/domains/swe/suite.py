"""Run a repo's own test suite in a sandbox, on the clean checkout or on variants of it (a bug, a bug plus a fix),
through the hardened pytest runner.

``RepoSuite.run(variants)`` packs up to ``batch_size`` variants into one sandbox job (``propel_box.pytest_runner``
with the vendored pytest zip), so pytest is imported once per batch. Each variant comes back as a
``propel.testsuite.SuiteRun``: ``tests`` maps every test id (``classname::name``, as the JUnit XML names it) to
what the test function did, from the graded child's own authenticated account; the JUnit outcomes, the audit
findings and the runner code rebound during the run come with it, so a variant that tampers with pytest from
library code is caught (``BugValidator`` reads them). During the run the checkout is read-only (Landlock): the
suite writes only to its scratch folder. Nothing a variant does raises: a crash, hang or broken report is a status.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from propel.domains.swe.checkout import repo_files
from propel.domains.swe.repos import RepoProfile
from propel.sandbox.job import Limits
from propel.sandbox.sandbox import Sandbox
from propel.testsuite.runner import SuiteRun, encode_files, read_suite_record
from propel.testsuite.shipping import framed_records, graded_limits, job, job_limits

Variant = Mapping[str, "bytes | str | None"]
"""Files that differ from the clean checkout: ``{relative path: new content}``, ``None`` to delete the file."""

RUNNER_VERSION = 6
"""Bumped when how a suite runs changes what it reports (manifests record it and are rebuilt on a mismatch); 3: the
graded child may start threads (``SUITE_THREADS``); 6: test ids without pytest's positional auto-ids
(``runner.stable_test_id``: isodate's parameters come from a set whose order changes with every process, so a repair
was graded "tests gone") and every suite job runs with string-hash seed 0."""
SUITE_THREADS = 32
"""Tasks (threads, or processes the audit hook did not stop) a repository suite's graded child may start."""


class RepoSuite:
    """Runs one repo's suite on variants of its clean checkout in a sandbox.

    Args:
        profile: the repo's profile (test paths, python path, timeout).
        root: the clean checkout (``checkout(profile)``).
        sandbox: where the suite runs (``LocalSandbox`` or ``DockerSandbox``).
        memory_mb: address-space limit of one suite run.
        batch_size: variants per sandbox job (jobs run in parallel over the sandbox's workers).
        timeout_s: wall-clock limit of one suite run (default: the profile's).
    """

    def __init__(
        self,
        profile: RepoProfile,
        root: str | os.PathLike,
        sandbox: Sandbox,
        memory_mb: int = 1024,
        batch_size: int = 4,
        timeout_s: float | None = None,
    ) -> None:
        self.timeout_s = float(timeout_s if timeout_s is not None else profile.timeout_s)
        if memory_mb < 128 or batch_size < 1 or self.timeout_s <= 0:
            raise ValueError(
                f"RepoSuite needs memory_mb >= 128, batch_size >= 1 and timeout_s > 0, got {memory_mb}, {batch_size}, "
                f"{self.timeout_s}"
            )
        self.profile, self.root, self.sandbox = profile, os.fspath(root), sandbox
        self.memory_mb, self.batch_size = memory_mb, batch_size
        self._files = {f"repo/{name}": data for name, data in repo_files(root).items()}

    def run(self, variants: Sequence[Variant]) -> list[SuiteRun]:
        """One ``SuiteRun`` per variant, in order (``{}`` runs the clean checkout)."""
        batches = [list(variants[i : i + self.batch_size]) for i in range(0, len(variants), self.batch_size)]
        jobs = [self._job(batch) for batch in batches]
        out: list[SuiteRun] = []
        results = self.sandbox.run_many([j for j, _ in jobs]) if jobs else []
        for batch, (_, token), result in zip(batches, jobs, results, strict=True):
            raw = framed_records(result.stdout, token, len(batch))
            if raw is None:
                how = f"{result.outcome.value}, exit code {result.exit_code}: {result.stderr[-500:]}"
                out.extend([SuiteRun("runner", f"the suite job died before reporting ({how})")] * len(batch))
            else:
                out.extend(read_suite_record(r) for r in raw)
        return out

    def run_one(self, variant: Variant | None = None) -> SuiteRun:
        return self.run([variant or {}])[0]

    def _job(self, batch: list[Variant]):
        profile = self.profile
        suites = [
            {
                "files": encode_files(dict(variant)),
                "test_globs": list(profile.test_globs),
                "python_path": list(profile.python_path),
                "lean": False,
                "args": ["-o", "addopts=", "--rootdir", "{ws}", *profile.pytest_args, *profile.test_paths],
            }
            for variant in batch
        ]
        # a repository's own tests may start threads (cachetools' threading tests start 10), and Linux counts
        # threads against the graded child's process limit: 0 there would fail them as "can't start new thread"
        child = Limits(timeout_s=self.timeout_s, memory_mb=self.memory_mb, max_file_mb=64, max_processes=SUITE_THREADS)
        limits = job_limits(child, len(batch), per_item_s=2.0, output_per_item=3_000_000, setup_s=15.0)
        return job(
            "pytest_runner", {"limits": graded_limits(child), "suites": suites}, limits, self._files, pytest=True
        )
