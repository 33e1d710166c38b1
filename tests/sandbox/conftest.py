"""Sandboxes shared by the sandbox tests: one per backend per session (containers take seconds to create)."""

from __future__ import annotations

import os

import pytest

from propel.sandbox import Limits, LocalSandbox

TEST_LIMITS = Limits(timeout_s=2.0, memory_mb=256, max_processes=16, max_output_bytes=64_000, max_file_mb=4)


def docker_sandbox_or_skip(**kwargs):
    """A DockerSandbox, or skip locally / fail in CI (CI=true) when no engine or image is there."""
    from propel.sandbox import SandboxError
    from propel.sandbox.docker import DockerSandbox

    try:
        return DockerSandbox(**kwargs)
    except SandboxError as e:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"docker tests must run in CI: {e}")
        pytest.skip(f"no docker engine/image here: {e}")


@pytest.fixture(scope="session")
def local_sandbox():
    with LocalSandbox(limits=TEST_LIMITS, max_workers=2) as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def docker_sandbox():
    sandbox = docker_sandbox_or_skip(limits=TEST_LIMITS, max_workers=2)
    yield sandbox
    sandbox.close()


@pytest.fixture(scope="session", params=["local", pytest.param("docker", marks=pytest.mark.docker)])
def sandbox(request):
    """Each backend in turn, with the tests' limits as its defaults."""
    return request.getfixturevalue(f"{request.param}_sandbox")
