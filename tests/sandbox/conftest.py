"""Sandboxes shared by the sandbox tests: one per backend per session (containers take seconds to create)."""

from __future__ import annotations

import pytest

from propel.sandbox import Limits, LocalSandbox

TEST_LIMITS = Limits(timeout_s=2.0, memory_mb=256, max_processes=16, max_output_bytes=64_000, max_file_mb=4)


@pytest.fixture(scope="session")
def local_sandbox():
    with LocalSandbox(limits=TEST_LIMITS, max_workers=2) as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def docker_sandbox(docker_sandbox_or_skip):
    sandbox = docker_sandbox_or_skip(limits=TEST_LIMITS, max_workers=2)
    yield sandbox
    sandbox.close()


@pytest.fixture(scope="session", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox(request):
    """Each backend in turn, with the tests' limits as its defaults."""
    return request.getfixturevalue(f"{request.param}_sandbox")
