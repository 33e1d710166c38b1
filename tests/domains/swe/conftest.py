"""The SWE repos for the tests: fetched from PyPI and preflighted once into propel's cache (``PROPEL_CACHE``)."""

from __future__ import annotations

import pytest

from tests.conftest import missing_dependency


@pytest.fixture(scope="session")
def swe_repo(sandbox):
    """``swe_repo(name) -> (profile, checkout, manifest)``: the preparer's fetch, checkout and preflight (cached)."""
    from propel.domains.swe.checkout import checkout
    from propel.domains.swe.prepare import load_manifest
    from propel.domains.swe.repos import get_repo

    done = {}

    def get(name):
        if name not in done:
            profile = get_repo(name)
            done[name] = (profile, checkout(profile), load_manifest(profile, sandbox))
        return done[name]

    return get


@pytest.fixture(scope="session")
def docker_box():
    """A DockerSandbox, or a skip locally / a failure in CI (CI=true) when no engine or image is there."""
    from propel.sandbox import SandboxError
    from propel.sandbox.docker import DockerSandbox

    try:
        box = DockerSandbox(max_workers=2)
    except SandboxError as e:
        missing_dependency(f"no docker engine/image here: {e}")
    with box:
        yield box


@pytest.fixture(scope="session", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def parse_validator(request, swe_repo, sandbox):
    """A ``BugValidator`` for ``parse`` on each backend (the manifest comes from the local preflight)."""
    from propel.domains.swe.validity import BugValidator

    profile, root, manifest = swe_repo("parse")
    box = sandbox if request.param == "local" else request.getfixturevalue("docker_box")
    return BugValidator(profile, root, box, manifest=manifest)
