"""The procedural generator yields valid bugs on every shipped repo (2 per repo, from at most 12 candidates each, to
keep CI fast); its rejected candidates are only ever semantically inert, suite-breaking or beyond what the suite's
replayable calls show (``untrusted``), never malformed. A stateful library yields fewer: the replay rebuilds an
argument from its constructor call alone (what the suite did to it since is not replayed), so a bug seen only after a
mutation is refused as ``untrusted`` (cachetools: 1 trusted of 12 candidates, docs/trusted_grading.md), never paid."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from propel.domains.swe.baseline import baseline_bugs
from propel.domains.swe.repos import REPOS
from propel.domains.swe.validity import BugValidator

PER_REPO = 2


def test_procedural_bugs_are_valid_on_every_shipped_repo(swe_repo, sandbox):
    ready = [swe_repo(name) for name in REPOS]

    def run(item):
        profile, root, manifest = item
        validator = BugValidator(profile, root, sandbox, manifest=manifest, batch_size=PER_REPO)
        return profile, manifest, baseline_bugs(validator, PER_REPO, seed=0, max_candidates=6 * PER_REPO)

    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(run, ready))
    full = [profile.name for profile, _, found in results if len(found.bugs) == PER_REPO]
    assert len(full) >= len(REPOS) - 1, full  # every repository but at most one stateful one yields both
    for profile, manifest, found in results:
        assert 1 <= len(found.bugs) <= PER_REPO, (profile.name, found.reasons)
        for bug, verdict in found.bugs:
            assert verdict.valid and verdict.changed == (bug.path,) and profile.is_source_path(bug.path)
            assert verdict.failing and set(verdict.failing) <= set(manifest.passing)
        assert set(found.reasons) <= {"no_failing_test", "suite_broken", "untrusted"}, (profile.name, found.reasons)
        assert all(verdict.trusted for _, verdict in found.bugs)
        assert 0 < found.validity_rate <= 1
