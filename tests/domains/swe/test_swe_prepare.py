"""The preparer: a clean, reproducible checkout per repo and a manifest of the tests that pass there."""

from __future__ import annotations

import dataclasses

from propel.domains.swe.checkout import git
from propel.domains.swe.prepare import Manifest, load_manifest, main, manifest_path


def test_parse_anchor_checkout_and_manifest(swe_repo):
    profile, root, manifest = swe_repo("parse")
    assert git(root, "status", "--porcelain").stdout == b""  # clean
    head = git(root, "rev-parse", "HEAD").stdout.decode().strip()
    assert manifest.commit == head == "43a42eaf256bbbacd0f89a76fb82d49beec5b60f"  # fixed author and date
    assert manifest.counts == {"passed": 96, "skipped": 1}  # the expected run: 96 passed, 1 skipped
    assert len(manifest.passing) == 96 and not manifest.flaky
    assert all("::" in t for t in manifest.passing) and "tests.test_parse::test_custom_type" in manifest.passing


def test_manifests_are_cached_per_repo_and_version(swe_repo, sandbox, tmp_path):
    profile, _, manifest = swe_repo("parse")
    path = manifest_path(profile)
    assert path.name == "parse-1.20.2.json" and Manifest.load(path) == manifest
    assert load_manifest(profile, sandbox) == manifest  # from the cache: no preflight
    fake = dataclasses.replace(manifest, passing=["a::b"])
    fake.save(tmp_path / "m.json")
    assert Manifest.load(tmp_path / "m.json") == fake


def test_cli_names_unknown_repos(capsys):
    assert main(["--repos", "nope", "--fetch-only"]) == 1
    assert "unknown SWE repo 'nope'" in capsys.readouterr().err


def test_concurrent_first_uses_preflight_once_and_agree(swe_repo, tmp_path, monkeypatch):
    """Two workers reaching a fresh cache at once (pytest-xdist, two runs): one preflights, the other waits and reads
    its manifest; before, each preflighted and saved its own, and one graded against a manifest the file no longer
    held."""
    import threading
    import time

    import propel.domains.swe.prepare as prepare

    profile, _, manifest = swe_repo("parse")
    calls = []

    def slow_preflight(profile, sandbox, cache=None):
        calls.append(threading.get_ident())
        time.sleep(0.3)  # long enough for the other worker to arrive meanwhile
        return dataclasses.replace(manifest, wall_s=float(len(calls)))  # each preflight's own timings

    monkeypatch.setattr(prepare, "preflight", slow_preflight)
    results = []
    workers = [
        threading.Thread(target=lambda: results.append(load_manifest(profile, object(), tmp_path))) for _ in range(2)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert len(calls) == 1 and len(results) == 2 and results[0] == results[1]
    assert Manifest.load(manifest_path(profile, tmp_path)) == results[0]
