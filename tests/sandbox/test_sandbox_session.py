"""Sandbox sessions on every backend: the workspace outlives each command (hostile ones included), processes do not,
sessions cannot see each other, and nothing outlives ``close()`` or a SIGKILLed owner (Docker)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from propel.sandbox import Job, Limits, LocalSandbox, Outcome, Result, Sandbox

SLACK = 4.0  # the machine is shared: allow for scheduling noise, not for a missed kill
BACKENDS = ["local", pytest.param("docker", marks=pytest.mark.docker)]


def bash(script: str, **kwargs) -> Job:
    return Job(command=["bash", "-c", script], **kwargs)


@pytest.fixture(scope="module", params=BACKENDS)
def session(request):
    """One session per backend shared by the module's tests: each hostile command must leave it working."""
    sandbox = request.getfixturevalue(f"{request.param}_sandbox")
    with sandbox.session() as s:
        assert s.run(bash("echo kept > marker.txt")).ok
        yield s


def assert_still_works(session) -> None:
    """The workspace is as the fixture left it and a new command runs normally."""
    result = session.run(bash("cat marker.txt; echo ok"))
    assert result.outcome is Outcome.OK and result.stdout == "kept\nok\n", f"session broken: {result}"


def test_workspace_persists_across_commands(session):
    first = session.run(bash("mkdir -p notes && echo hello > notes/a.txt && pwd && echo $HOME $TMPDIR"))
    assert first.outcome is Outcome.OK, first
    assert first.stdout == f"{session.workspace}\n{session.workspace} {session.workspace}\n"
    second = session.run(bash("cat notes/a.txt; echo again >> notes/a.txt"))
    assert second.outcome is Outcome.OK and second.stdout == "hello\n", second
    assert session.run(bash("cat notes/a.txt")).stdout == "hello\nagain\n"


def test_files_are_written_into_the_workspace(session):
    result = session.run(bash("cat sub/in.txt; chmod 444 sub/in.txt; mkdir -p taken", files={"sub/in.txt": "one\n"}))
    assert result.outcome is Outcome.OK and result.stdout == "one\n", result
    assert session.run(bash("cat sub/in.txt")).stdout == "one\n"  # still there for the next command
    # overwriting a file an earlier command made read-only
    assert session.run(bash("cat sub/in.txt", files={"sub/in.txt": "two\n"})).stdout == "two\n"
    # a name an earlier command made a directory: an error result, not an exception, and the worker lives on
    blocked = session.run(bash("echo ran", files={"taken": "x"}))
    assert blocked.outcome is Outcome.ERROR and "taken" in blocked.stderr and blocked.stdout == "", blocked
    assert_still_works(session)


def test_timeout_then_still_works(session):
    start = time.monotonic()
    result = session.run(bash("echo started; sleep 30", limits=Limits(timeout_s=1.0)))
    assert result.outcome is Outcome.TIMEOUT, result
    assert time.monotonic() - start <= 1.0 + SLACK
    assert_still_works(session)


def test_output_flood_is_truncated(session):
    result = session.run(bash("yes"))
    assert result.outcome is Outcome.OUTPUT_LIMIT and result.truncated, result
    assert len(result.stdout) == session.limits.max_output_bytes
    assert_still_works(session)


@pytest.mark.parametrize("script", ["kill -9 $PPID; sleep 5", "kill -9 -1; sleep 5"], ids=["parent", "everything"])
def test_killing_the_worker_keeps_the_workspace(session, script):
    start = time.monotonic()
    result = session.run(bash(script))
    # under bubblewrap the worker is PID 1, which the kill cannot reach: the command then times out
    assert isinstance(result, Result) and result.outcome in (Outcome.KILLED, Outcome.TIMEOUT), result
    assert time.monotonic() - start <= SLACK
    assert_still_works(session)


def test_fork_bomb_is_contained(session):
    start = time.monotonic()
    result = session.run(bash(":(){ :|:& };:"))
    assert isinstance(result, Result), result
    assert time.monotonic() - start <= session.limits.timeout_s + SLACK
    # every bomb process is gone: a new command can again start several processes
    again = session.run(bash("for i in 1 2 3 4 5 6 7 8; do sleep 0.1 & done; wait; echo forked"))
    assert again.outcome is Outcome.OK and again.stdout == "forked\n", again
    assert_still_works(session)


def test_writing_outside_the_workspace_leaves_the_host_unchanged(session):
    tag = uuid.uuid4().hex
    etc, home, repo = Path(f"/etc/propel_x_{tag}"), Path(f"/root/propel_x_{tag}"), Path(__file__).parent / tag
    try:
        for target in (etc, repo):
            result = session.run(bash(f"echo x > {target}"))
            assert result.outcome is Outcome.ERROR, (target, result)
        session.run(bash(f"echo x > {home}"))  # bubblewrap: an empty tmpfs over /root; docker: read-only
        for target in (etc, home, repo):
            assert not target.exists(), target
    finally:
        for target in (etc, home, repo):
            target.unlink(missing_ok=True)
    assert_still_works(session)


def test_full_scratch_space_does_not_break_the_session(session):
    """A full /tmp (where the worker keeps each command's stdin) may cost one command, never the session."""
    fill = session.run(bash("i=0; while head -c 4M /dev/zero > /tmp/fill$i 2>/dev/null; do i=$((i+1)); done"))
    assert isinstance(fill, Result), fill
    data = "x" * 50_000
    first = session.run(Job(command=["cat"], stdin=data))
    assert first.outcome in (Outcome.OK, Outcome.KILLED), first
    again = session.run(Job(command=["cat"], stdin=data))
    assert again.outcome is Outcome.OK and again.stdout == data, again
    assert_still_works(session)


def test_background_process_dies_with_its_command(session):
    started = session.run(bash("sleep 100 & echo $! > bg.pid"))
    assert started.outcome is Outcome.OK, started
    check = session.run(bash("kill -0 $(cat bg.pid) 2>/dev/null && echo alive || echo gone"))
    assert check.stdout == "gone\n", check
    assert_still_works(session)


def _container_gone(client, container_id: str) -> bool:
    from docker.errors import NotFound

    try:
        client.containers.get(container_id)
    except NotFound:
        return True
    return False


def test_sessions_are_isolated_and_close_removes_everything(sandbox):
    a, b = sandbox.session(), sandbox.session()
    with a, b:
        assert a.run(bash("echo secret > mine.txt")).ok
        peek = b.run(bash(f"cat mine.txt {a.workspace}/mine.txt"))
        assert peek.outcome is Outcome.ERROR and "secret" not in peek.stdout, peek
        if isinstance(sandbox, LocalSandbox) and os.geteuid() == 0:  # a host uid each, none of the pool's
            uids = {os.stat(s.workspace).st_uid for s in (a, b)}
            assert len(uids) == 2 and not uids & set(sandbox._slot_uids.values()), uids
        containers = [s.run(Job(command=["hostname"])).stdout.strip() for s in (a, b)]
    for s, container in zip((a, b), containers, strict=True):
        assert s.closed
        if isinstance(sandbox, LocalSandbox):
            assert not os.path.exists(s.workspace)
        else:
            assert _container_gone(sandbox.client, container)
    a.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        a.run(bash("true"))


def test_closing_the_sandbox_closes_its_sessions():
    with LocalSandbox(limits=Limits(timeout_s=2.0), max_workers=1) as sandbox:
        session = sandbox.session()
        assert session.run(bash("echo x > f")).ok
    assert session.closed and not os.path.exists(session.workspace)


def test_session_is_optional_for_backends():
    class OneShot(Sandbox):
        def run(self, job: Job) -> Result:
            raise AssertionError("not called")

    with pytest.raises(NotImplementedError, match="OneShot"):
        OneShot().session()


@pytest.mark.docker
def test_docker_falls_back_to_a_restart_and_says_so(docker_sandbox, monkeypatch):
    from propel.sandbox.docker_session import DockerSessionBackend

    monkeypatch.setattr(DockerSessionBackend, "_kill_all", lambda self: False)  # the clean-up exec fails
    with docker_sandbox.session() as s:
        assert s.run(bash("echo x > f")).ok
        lost = s.run(bash("kill -9 $PPID; sleep 5"))
        assert lost.outcome is Outcome.KILLED, lost
        after = s.run(bash("ls; echo ok"))  # the clean-up runs in the background: the next command hears of it
        assert after.outcome is Outcome.OK and after.stdout == "ok\n" and "workspace is lost" in after.stderr, after


_ORPHAN = textwrap.dedent(
    """
    import time
    from propel.sandbox import Job, Limits
    from propel.sandbox.docker import DockerSandbox

    session = DockerSandbox(limits=Limits(timeout_s=5), max_workers=1).session()
    print(session.run(Job(command=["hostname"])).stdout.strip(), flush=True)
    time.sleep(120)
    """
)


@pytest.mark.docker
def test_containers_of_a_killed_process_are_reaped(docker_sandbox, caplog):
    proc = subprocess.Popen([sys.executable, "-c", _ORPHAN], stdout=subprocess.PIPE, text=True)
    try:
        container_id = proc.stdout.readline().strip()
        assert container_id, "the subprocess did not open a session"
        labels = docker_sandbox.client.containers.get(container_id).labels
        assert labels["propel.sandbox"] == "session"
        assert labels["propel.sandbox.host"] == socket.gethostname()
        assert labels["propel.sandbox.host_pid"] == str(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)  # no finalizer runs: the container outlives its owner
        proc.wait()
    assert not _container_gone(docker_sandbox.client, container_id)
    from propel.sandbox.docker import DockerSandbox

    with caplog.at_level(logging.INFO, logger="propel.sandbox.docker"):
        DockerSandbox(max_workers=1).close()  # the fixture already skipped (or failed in CI) without an engine
    assert _container_gone(docker_sandbox.client, container_id)
    assert any("left behind by dead processes" in r.getMessage() for r in caplog.records)


def test_local_session_without_bubblewrap():
    """Isolation "none": the workspace is the worker's own cwd; only the command's process group is killed."""
    with LocalSandbox(limits=Limits(timeout_s=2.0), isolation="none", max_workers=1) as sandbox:
        with sandbox.session() as s:
            assert s.run(bash("echo kept > marker.txt; sleep 100 & echo $! > bg.pid")).ok
            assert s.run(bash("pwd")).stdout == f"{s.workspace}\n"
            lost = s.run(bash("kill -9 $PPID; sleep 5"))
            assert lost.outcome is Outcome.KILLED, lost
            # a zombie counts as gone: without a PID namespace the host's init reaps it (or, in some containers, not)
            state = "awk '/^State/ {print $2}' /proc/$(cat bg.pid)/status 2>/dev/null"
            check = s.run(bash(f'case "$({state})" in ""|Z) echo gone;; *) echo alive;; esac'))
            assert check.stdout == "gone\n", check
            assert_still_works(s)
            daemon = s.run(bash("setsid sleep 100 > /dev/null 2>&1 < /dev/null & echo $!"))
            assert daemon.outcome is Outcome.OK, daemon
        assert not os.path.exists(s.workspace)
    if os.geteuid() == 0:  # close() killed every process of the session's own uid
        assert _host_state(int(daemon.stdout)) in ("", "Z")


def _host_state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(line.split()[1] for line in f if line.startswith("State:"))
    except FileNotFoundError:
        return ""


def _held(folder: str) -> int:
    """Disk space a host folder holds (what the workspace cap measures)."""
    return sum(os.lstat(os.path.join(d, n)).st_blocks * 512 for d, _, names in os.walk(folder) for n in names)


@pytest.mark.parametrize("isolation", ["auto", "none"])
def test_a_local_workspace_is_bounded_like_scratch(isolation):
    """A local session's workspace is a host folder, so no tmpfs bounds it: a command that grows it past the cap
    (256 MB by default, as the scratch space) is killed and reported as output_limit, whether it writes one big file
    or many small ones, or ends over the cap with files it wrote; the workspace keeps working, and deleting brings it
    back under."""
    limits = Limits(timeout_s=20.0, max_file_mb=64)
    with LocalSandbox(limits=limits, max_workers=1, isolation=isolation) as box, box.session() as s:
        flood = s.run(bash("for i in 1 2 3 4 5 6; do head -c 64M /dev/zero > f$i; done"))
        assert flood.outcome is Outcome.OUTPUT_LIMIT and "over its limit" in flood.stderr, flood
        assert _held(s.workspace) <= (256 + 64) << 20, _held(s.workspace)  # killed within a file of the cap
        assert s.run(bash("rm -f f*; echo small > a.txt; cat a.txt")).stdout == "small\n"
    with LocalSandbox(limits=limits, max_workers=1, isolation=isolation, workspace_mb=8) as box, box.session() as s:
        big = s.run(bash("head -c 40M /dev/zero > big"))
        assert big.outcome is Outcome.OUTPUT_LIMIT and "workspace" in big.stderr, big
        many = s.run(bash("rm big; for i in $(seq 40); do head -c 1M /dev/zero > m$i; done"))
        assert many.outcome is Outcome.OUTPUT_LIMIT and "workspace" in many.stderr, many
        assert s.run(bash("cat m* > /dev/null; ls | wc -l")).outcome is Outcome.OK  # reading never trips it
        assert s.run(bash("rm -f m*; echo ok > a.txt")).outcome is Outcome.OK
        files = s.run(Job(command=["true"], files={"in.bin": b"x" * (9 << 20)}))  # the caller's files count too
        assert files.outcome is Outcome.OUTPUT_LIMIT, files
        # Left over the cap (9 MB), a command that deletes and writes back less than it found still ends over the
        # cap with what it wrote: it is over, however quickly it ran; reading or deleting alone is not.
        rewrite = s.run(bash("rm in.bin; head -c 8704K /dev/zero > again"))
        assert rewrite.outcome is Outcome.OUTPUT_LIMIT and "workspace" in rewrite.stderr, rewrite
        assert s.run(bash("cat again > /dev/null")).outcome is Outcome.OK
        assert s.run(bash("rm again")).outcome is Outcome.OK
