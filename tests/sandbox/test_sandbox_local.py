"""LocalSandbox specifics: limits, files/commands, both isolation modes, worker reuse and bad arguments."""

from __future__ import annotations

import shutil
import signal
import tempfile
import threading
import time
from pathlib import Path

import pytest

from propel.sandbox import Job, Limits, LocalSandbox, Outcome, SandboxError, make_sandbox
from propel.sandbox.bwrap import bwrap_path

ISOLATIONS = ["none", "bwrap"]


def needs_bwrap(isolation: str, missing) -> None:
    """Bubblewrap tests skip without ``bwrap`` locally and fail under CI=true (scripts/system_deps.sh installs it)."""
    if isolation == "bwrap" and bwrap_path() is None:
        missing("no bwrap on PATH (scripts/system_deps.sh installs bubblewrap)")


@pytest.fixture(scope="module", params=ISOLATIONS)
def any_local(request, missing):
    needs_bwrap(request.param, missing)
    limits = Limits(timeout_s=2.0, memory_mb=256, max_processes=16, max_output_bytes=10_000, max_file_mb=1)
    with LocalSandbox(limits=limits, isolation=request.param) as sandbox:
        yield sandbox


def test_command_job_with_files_args_and_stdin(any_local):
    job = Job(
        command=["sh", "-c", 'cat data/in.txt; read line; echo "$line"; echo err >&2; exit 4'],
        files={"data/in.txt": "from file\n"},
        stdin=b"from stdin\n",
    )
    result = any_local.run(job)
    assert result.outcome is Outcome.ERROR and result.exit_code == 4
    assert result.stdout == "from file\nfrom stdin\n"
    assert result.stderr == "err\n"


def test_missing_command_is_an_error_not_an_exception(any_local):
    result = any_local.run(Job(command=["definitely-not-a-program-xyz"]))
    assert result.outcome is Outcome.ERROR and result.exit_code == 127
    assert "definitely-not-a-program-xyz" in result.stderr


def test_cpu_limit_ends_a_busy_job_early():
    with LocalSandbox(limits=Limits(timeout_s=60, cpu_s=1)) as sandbox:
        result = sandbox.run(Job(source="while True:\n    pass\n"))
    assert result.outcome is Outcome.TIMEOUT, result
    assert result.exit_code in (-signal.SIGXCPU, -signal.SIGKILL), result
    assert result.wall_s < 30, result  # the CPU limit (1 s of CPU) ended it, not the 60 s wall clock
    # the CPU time is recorded; wait4's rusage has read 0.86 s for a job the kernel's 1 s limit ended (a loaded CI
    # machine, stop 70), so the band is loose: it still fails when nothing or a wall-clock figure is recorded
    assert result.cpu_s is not None and 0.5 <= result.cpu_s < 5, result


def test_file_size_limit(any_local):
    result = any_local.run(Job(source="open('big', 'wb').write(b'x' * (2 << 20))\n"))
    assert result.outcome is Outcome.OUTPUT_LIMIT


def test_stderr_is_truncated_too(any_local):
    result = any_local.run(Job(source="import sys\nsys.stderr.write('e' * 50_000)\n"))
    assert result.outcome is Outcome.OUTPUT_LIMIT
    assert len(result.stderr) == 10_000 and result.truncated


def test_each_job_gets_a_fresh_work_dir_and_tmp(any_local):
    first = any_local.run(Job(source="import os, tempfile\nopen('left', 'w').write('x')\nprint(os.getcwd())"))
    second = any_local.run(Job(source="import os\nprint(os.listdir('.'))\nprint(os.getcwd())"))
    assert first.ok and second.ok
    assert second.stdout.splitlines()[0] == "['main.py']"
    assert first.stdout.strip() != second.stdout.splitlines()[1]


def test_exit_codes_and_uncaught_exceptions(any_local):
    assert any_local.run(Job(source="import sys\nsys.exit(0)")).outcome is Outcome.OK
    result = any_local.run(Job(source="raise ValueError('bad value')"))
    assert result.outcome is Outcome.ERROR and result.exit_code == 1
    assert result.stderr.splitlines()[-1] == "ValueError: bad value"
    assert "_worker" not in result.stderr  # the traceback shows the job's frames only


def test_threads_and_output_flush_at_exit(any_local):
    source = "import threading\nt = threading.Thread(target=lambda: print('from thread'))\nt.start()\nprint('main')\n"
    result = any_local.run(Job(source=source))
    assert result.ok
    assert sorted(result.stdout.splitlines()) == ["from thread", "main"]


def test_per_job_limits_override_defaults(any_local):
    result = any_local.run(Job(source="import time\ntime.sleep(1)\nprint('done')", limits=Limits(timeout_s=0.3)))
    assert result.outcome is Outcome.TIMEOUT and result.wall_s < 1.0


def test_concurrent_jobs_use_both_workers(any_local):
    start = time.monotonic()
    results = any_local.run_many([Job(source="import time\ntime.sleep(0.5)\nprint('x')") for _ in range(4)])
    assert all(r.ok for r in results)
    assert time.monotonic() - start < 1.9  # 4 half-second jobs on 2 workers, not one after another


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_workers_outlive_the_threads_that_started_them(isolation, missing):
    """Regression: bwrap's --die-with-parent fires when the *thread* that forked the worker ends, so workers
    first started inside one run_many call (its pool threads) were killed right after it and the next round
    came back KILLED ("sandbox worker lost ... status -9"). Fresh sandbox: its workers start in run_many."""
    needs_bwrap(isolation, missing)
    jobs = [
        Job(command=["python3", "-I", "-c", "print(1)"]),
        Job(source="print(2)"),
        Job(command=["sh", "-c", "echo 3"]),
        Job(source="print(4)"),
    ]
    with LocalSandbox(limits=Limits(timeout_s=10.0), max_workers=2, isolation=isolation) as sandbox:
        for round_ in range(3):
            results = sandbox.run_many(jobs)
            assert [r.outcome for r in results] == [Outcome.OK] * 4, (round_, results)
            assert [r.stdout for r in results] == ["1\n", "2\n", "3\n", "4\n"], (round_, results)


def test_bwrap_job_is_unprivileged_and_offline(missing):
    needs_bwrap("bwrap", missing)
    with LocalSandbox(isolation="bwrap") as sandbox:
        result = sandbox.run(Job(source="import os, socket\nprint(os.getuid(), socket.gethostname())"))
    assert result.stdout == "65534 sandbox\n"


def test_make_sandbox_factory():
    with make_sandbox("local", max_workers=1) as sandbox:
        assert isinstance(sandbox, LocalSandbox)
        assert sandbox.run(Job(source="print(2 + 2)")).stdout == "4\n"
    with pytest.raises(ValueError, match="backend"):
        make_sandbox("nope")


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: LocalSandbox(limits=Limits(timeout_s=-1)), "timeout_s"),
        (lambda: LocalSandbox(max_workers=0), "max_workers"),
        (lambda: LocalSandbox(isolation="chroot"), "isolation"),
        (lambda: LocalSandbox(python="/no/such/python3"), "python"),
        (lambda: LocalSandbox(scratch_mb=0), "scratch_mb"),
    ],
)
def test_bad_arguments_are_clear_errors(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_job_is_a_clear_error(local_sandbox):
    with pytest.raises(ValueError, match="timeout_s"):
        local_sandbox.run(Job(source="print(1)", limits=Limits(timeout_s=-0.5)))
    with pytest.raises(ValueError, match="exactly one"):
        local_sandbox.run(Job())
    with pytest.raises(ValueError, match="relative"):
        local_sandbox.run(Job(source="", files={"../x": "no"}))


def test_worker_that_cannot_start_is_a_sandbox_error():
    with LocalSandbox(isolation="none", python="/bin/false") as sandbox, pytest.raises(SandboxError, match="start"):
        sandbox.run(Job(source="print(1)"))


_DAEMON = """
import os, sys, time
if os.fork() == 0:  # double fork into a new session: out of the job's process group and session
    os.setsid()
    if os.fork() == 0:
        with open(sys.argv[1] + ".part", "w") as f:  # written whole, then renamed: never read half-written
            f.write(str(os.getpid()))
        os.rename(sys.argv[1] + ".part", sys.argv[1])
        time.sleep(100)
    os._exit(0)
os.wait()
while not os.path.exists(sys.argv[1]):
    time.sleep(0.01)
time.sleep(float(sys.argv[2]))
"""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(line.split()[1] for line in f if line.startswith("State:")) != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("when", ["after-the-job", "on-close"])
def test_isolation_none_leaves_no_daemon_behind(when):
    """With isolation "none" a double-forked daemon dies with its job, or with ``close()``."""
    folder = Path(tempfile.mkdtemp(prefix="propel-daemon-"))
    folder.chmod(0o777)  # as root the worker runs as a slot uid, which cannot enter pytest's 0700 tmp_path
    pid_file = folder / "daemon.pid"
    sandbox = LocalSandbox(limits=Limits(timeout_s=20), isolation="none", max_workers=1)
    try:
        job = Job(source=_DAEMON, args=[str(pid_file), "0" if when == "after-the-job" else "30"])
        if when == "after-the-job":
            assert sandbox.run(job).ok
        else:
            runner = threading.Thread(target=sandbox.run, args=(job,), daemon=True)
            runner.start()
            deadline = time.monotonic() + 10
            while not pid_file.exists() and time.monotonic() < deadline:
                time.sleep(0.01)
    finally:
        sandbox.close()
    pid = int(pid_file.read_text())
    shutil.rmtree(folder, ignore_errors=True)
    deadline = time.monotonic() + 2
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not _alive(pid)
