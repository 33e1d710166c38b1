"""DockerSandbox specifics: container hardening, clear errors for a missing image, the factory."""

from __future__ import annotations

import pytest

from propel.sandbox import Job, Outcome, SandboxError, make_sandbox

pytestmark = pytest.mark.docker


def test_container_is_locked_down(docker_sandbox):
    source = (
        "import os\nprint(os.getuid())\n"
        "try:\n    open('/etc/escape', 'w')\nexcept OSError as e:\n    print(type(e).__name__)\n"
        "print(open('/proc/self/status').read().split('CapEff:')[1].split()[0])\n"
    )
    result = docker_sandbox.run(Job(source=source))
    assert result.outcome is Outcome.OK, result
    uid, write_error, caps = result.stdout.split()
    assert uid == "65534"
    assert write_error in ("OSError", "PermissionError")
    assert int(caps, 16) == 0


def test_command_job_in_container(docker_sandbox):
    result = docker_sandbox.run(Job(command=["sh", "-c", "cat in.txt; exit 2"], files={"in.txt": "data\n"}))
    assert result.outcome is Outcome.ERROR and result.exit_code == 2
    assert result.stdout == "data\n"


def test_missing_image_names_the_fix(docker_sandbox):  # the fixture skips (fails in CI) without an engine
    with pytest.raises(SandboxError, match="docker_engine.sh"):
        make_sandbox("docker", image="propel-sandbox:no-such-tag")


def test_bad_docker_arguments():
    with pytest.raises(ValueError, match="cpus"):
        make_sandbox("docker", cpus=0)
    with pytest.raises(ValueError, match="image"):
        make_sandbox("docker", image="")
