"""DockerSandbox specifics: container hardening, clear errors for a missing image, the factory."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest
from docker.errors import NotFound

from propel.sandbox import Job, Limits, Outcome, SandboxError, make_sandbox

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


_HOGS = """
import os, sys
def hog():
    block = bytearray(200 << 20)
    for i in range(0, len(block), 4096):  # touch every page: under the address-space limit, over the cgroup's
        block[i] = 1
    return block
children = []
for _ in range(3):
    pid = os.fork()
    if pid == 0:
        kept = hog()
        import time
        time.sleep(5)
        os._exit(0)
    children.append(pid)
kept = hog()
sys.exit(1 if any(os.waitpid(p, 0)[1] for p in children) else 0)
"""


def test_container_memory_kill_is_a_memory_outcome(docker_sandbox):
    """The container's OOM killer ends the job: ``memory``, not ``killed``."""
    result = docker_sandbox.run(Job(source=_HOGS, limits=Limits(timeout_s=10, memory_mb=256, max_processes=16)))
    assert result.outcome is Outcome.MEMORY, result
    assert docker_sandbox.run(Job(source="print(1)")).stdout == "1\n"


def test_job_limits_above_the_containers_are_reported(docker_sandbox):
    """A job asking for more memory than its container allows is capped by it, and its result says so."""
    limits = Limits(timeout_s=10, memory_mb=docker_sandbox.limits.memory_mb * 8, max_processes=16)
    result = docker_sandbox.run(Job(source=_HOGS, limits=limits))
    assert result.outcome is Outcome.MEMORY, result
    assert "above the container's memory_mb" in result.stderr, result
    fine = docker_sandbox.run(Job(source="print(1)", limits=limits))
    assert fine.ok and fine.stderr == "", fine


_OWNER = textwrap.dedent(
    """
    import time
    from propel.sandbox.docker import DockerSandbox

    sandbox = DockerSandbox(max_workers=2).warm_up()
    print(" ".join(c.id for c in sandbox._containers), flush=True)
    time.sleep(120)
    """
)


def test_pool_containers_of_a_killed_process_are_cleaned_up(docker_sandbox):
    """Worker containers carry the owner labels too; ``python -m propel.sandbox.cleanup`` removes them
    once their owner is gone (a new DockerSandbox would too)."""
    proc = subprocess.Popen([sys.executable, "-c", _OWNER], stdout=subprocess.PIPE, text=True)
    try:
        ids = proc.stdout.readline().split()
        assert len(ids) == 2, "the subprocess did not start its workers"
        for cid in ids:
            assert docker_sandbox.client.containers.get(cid).labels["propel.sandbox"] == "worker"
        alive = subprocess.run([sys.executable, "-m", "propel.sandbox.cleanup"], capture_output=True, text=True)
        assert alive.returncode == 0, alive.stderr
        assert all(docker_sandbox.client.containers.get(cid) for cid in ids)  # a live owner's are kept
    finally:
        proc.send_signal(signal.SIGKILL)  # no finalizer runs
        proc.wait()
    done = subprocess.run([sys.executable, "-m", "propel.sandbox.cleanup"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # a removal another reaper has in progress is not an error
    assert "removed" in done.stdout, done.stdout
    # removed by this call, or by a sandbox another test process opened meanwhile (it reaps the same way; under
    # pytest -n 2 it can win the race, so the count of this call alone is not checked)
    deadline = time.monotonic() + 20
    for cid in ids:
        while True:
            try:
                docker_sandbox.client.containers.get(cid)
            except NotFound:
                break
            assert time.monotonic() < deadline, f"container {cid} of a killed process is still there"
            time.sleep(0.5)
