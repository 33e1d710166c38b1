"""Hostile programs on every backend: each ends in the right outcome within its limits, the host is unchanged, and the
next job on the same sandbox runs normally."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest

from propel.sandbox import Job, Outcome

TIMEOUT = 2.0
SLACK = 4.0  # the machine is shared: allow for scheduling noise, not for a missed kill


def run_and_check_next(sandbox, source: str, **job_kwargs):
    start = time.monotonic()
    result = sandbox.run(Job(source=source, **job_kwargs))
    elapsed = time.monotonic() - start
    follow = sandbox.run(Job(source="print(sum(range(10)))"))
    assert follow.outcome is Outcome.OK and follow.stdout == "45\n", f"next job broken: {follow}"
    return result, elapsed


def test_normal_job(sandbox):
    result, _ = run_and_check_next(sandbox, "import sys\nprint('hi', sys.argv[1:], input())", args=["a"], stdin="x\n")
    assert result.outcome is Outcome.OK
    assert result.exit_code == 0
    assert result.stdout == "hi ['a'] x\n"


def test_infinite_loop_times_out(sandbox):
    result, elapsed = run_and_check_next(sandbox, "while True:\n    pass\n")
    assert result.outcome is Outcome.TIMEOUT
    assert TIMEOUT - 0.1 <= result.wall_s <= TIMEOUT + SLACK
    assert elapsed <= TIMEOUT + SLACK


def test_sleep_past_timeout(sandbox):
    result, elapsed = run_and_check_next(sandbox, "import time\ntime.sleep(30)\n")
    assert result.outcome is Outcome.TIMEOUT
    assert elapsed <= TIMEOUT + SLACK


def test_fork_bomb_is_contained(sandbox):
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    result, elapsed = run_and_check_next(sandbox, bomb)
    assert result.outcome in (Outcome.TIMEOUT, Outcome.KILLED, Outcome.ERROR)
    assert elapsed <= TIMEOUT + SLACK
    # Every bomb process is gone: a new job can again start several processes.
    forks = "import os\nfor _ in range(8):\n    if os.fork() == 0:\n        os._exit(0)\n"
    again = sandbox.run(Job(source=forks + "for _ in range(8):\n    os.wait()\nprint('forked')"))
    assert again.outcome is Outcome.OK and again.stdout == "forked\n", again


def test_huge_allocation_is_a_memory_outcome(sandbox):
    result, _ = run_and_check_next(sandbox, "x = bytearray(10 * 1024**3)\nprint('allocated')\n")
    assert result.outcome is Outcome.MEMORY
    assert "allocated" not in result.stdout


def test_gigabyte_of_stdout_is_cut_off(sandbox):
    source = "import sys\nb = b'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.buffer.write(b)\n"
    result, elapsed = run_and_check_next(sandbox, source)
    assert result.outcome is Outcome.OUTPUT_LIMIT
    assert result.truncated
    assert len(result.stdout) == sandbox.limits.max_output_bytes
    assert elapsed <= TIMEOUT + SLACK


def test_writing_outside_the_work_dir_leaves_host_unchanged(sandbox):
    target = Path(__file__).parent / f"escape-{uuid.uuid4().hex}.txt"
    source = f"open({str(target)!r}, 'w').write('escaped')\n"
    try:
        result, _ = run_and_check_next(sandbox, source)
        assert not target.exists()
    finally:
        target.unlink(missing_ok=True)
    assert result.outcome is Outcome.ERROR
    assert "Error" in result.stderr


def test_host_environment_and_home_are_hidden(sandbox, monkeypatch):
    monkeypatch.setenv("PROPEL_TEST_SECRET", "s3cret-value")
    home = os.path.expanduser("~")
    source = (
        "import os\nprint(sorted(os.environ))\nprint('s3cret-value' in str(os.environ))\n"
        f"try:\n    print(os.listdir({home!r}))\nexcept OSError as e:\n    print('denied', type(e).__name__)\n"
    )
    result, _ = run_and_check_next(sandbox, source)
    assert result.outcome is Outcome.OK
    env_line, secret_line, home_line = result.stdout.splitlines()
    assert "PROPEL_TEST_SECRET" not in env_line and secret_line == "False"
    assert home_line.startswith("denied") or home_line == "[]", home_line


def _host_address() -> str:
    """An address of this host that is not loopback (reachable from anything sharing the host's network)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.255", 1))
            return probe.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def test_network_is_cut_off(sandbox):
    server = socket.create_server(("0.0.0.0", 0))
    server.settimeout(0.2)
    port = server.getsockname()[1]
    accepted = []

    def accept():
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                accepted.append(server.accept())
                return
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    source = (
        "import socket\ntry:\n"
        f"    socket.create_connection(({_host_address()!r}, {port}), timeout=1)\n    print('connected')\n"
        "except OSError as e:\n    print('blocked', e)\n"
    )
    try:
        result, _ = run_and_check_next(sandbox, source)
    finally:
        thread.join()
        server.close()
    assert result.outcome is Outcome.OK
    assert result.stdout.startswith("blocked"), result.stdout
    assert not accepted


def test_killing_the_parent_only_ends_this_job(sandbox):
    """Under bubblewrap the worker is PID 1 and ignores the kill (the job then times out); in a container the worker
    dies and is replaced."""
    source = "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(5)\n"
    result, elapsed = run_and_check_next(sandbox, source)
    assert result.outcome in (Outcome.KILLED, Outcome.TIMEOUT), result
    assert elapsed <= TIMEOUT + SLACK


def test_syntax_error(sandbox):
    result, _ = run_and_check_next(sandbox, "def f(:\n    return 1\n")
    assert result.outcome is Outcome.ERROR
    assert result.exit_code == 1
    assert "SyntaxError" in result.stderr


def test_non_utf8_output(sandbox):
    result, _ = run_and_check_next(sandbox, "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe ok\\n')\n")
    assert result.outcome is Outcome.OK
    assert result.stdout == "\ufffd\ufffd ok\n"


@pytest.mark.parametrize("count", [6])
def test_run_many_keeps_order(sandbox, count):
    jobs = [Job(source=f"print({i} * {i})") for i in range(count)]
    jobs.insert(2, Job(source="raise SystemExit(3)"))
    results = sandbox.run_many(jobs)
    assert [r.stdout for r in results] == [f"{i * i}\n" for i in range(2)] + [""] + [
        f"{i * i}\n" for i in range(2, count)
    ]
    assert results[2].outcome is Outcome.ERROR and results[2].exit_code == 3


# Host sockets and files, scratch space, cross-job leftovers, a stalled worker, a desynchronised slot.

_PROBE_HOST = """
import os, socket
for path in ("/var/run/docker.sock", "/run/docker.sock"):
    try:
        with socket.socket(socket.AF_UNIX) as s:
            s.settimeout(2)
            s.connect(path)
            s.sendall(b"GET /version HTTP/1.0\\r\\n\\r\\n")
            print("reached", path, s.recv(64)[:12])
    except OSError as e:
        print("blocked", path, type(e).__name__)
for path in READ:
    try:
        print("read", path, len(open(path, "rb").read()))
    except OSError as e:
        print("blocked", path, type(e).__name__)
for path in ("/run", "/var/run", "/root", "/home"):  # an image's own empty /run folders are fine, sockets are not
    found = [os.path.join(d, n) for d, _, names in os.walk(path) for n in names]
    print("listed" if found else "empty", path, found[:5])
"""


def test_host_sockets_and_files_are_out_of_reach(sandbox, tmp_path):
    """No host Unix socket (the Docker daemon's), no checkout, no private file, no /run or homes."""
    secret = tmp_path / "secret.txt"
    secret.write_text("private")
    secret.chmod(0o600)
    read = [__file__, str(Path(__file__).parents[2] / "pyproject.toml"), str(secret), "/etc/shadow"]
    result, _ = run_and_check_next(sandbox, f"READ = {read!r}\n" + _PROBE_HOST)
    assert result.outcome is Outcome.OK, result
    lines = result.stdout.splitlines()
    assert all(line.startswith(("blocked", "empty")) for line in lines), result.stdout


_LEAVE = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
tag = sys.argv[1]
base = os.path.dirname(os.path.dirname(os.getcwd()))  # the folder holding every job's own folder
for d in (base, "/tmp", "/dev/shm", "/dev/mqueue", "/dev", "/", "/root", "/home", "/var/tmp", "/run"):
    try:
        with open(os.path.join(d, "left-" + tag), "w") as f:
            f.write("x")
        print("wrote", d)
    except OSError:
        pass
print("mq", libc.mq_open(("/left-" + tag).encode(), os.O_CREAT | os.O_RDWR, 0o600, None) >= 0)
print("shm", libc.shmget(0x5EED, 4096, 0o1600) >= 0)  # IPC_CREAT | 0600
"""
_FIND = """
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
tag = sys.argv[1]
base = os.path.dirname(os.path.dirname(os.getcwd()))
for d in (base, "/tmp", "/dev/shm", "/dev/mqueue", "/dev", "/", "/root", "/home", "/var/tmp", "/run"):
    if os.path.exists(os.path.join(d, "left-" + tag)):
        print("found", d)
if libc.mq_open(("/left-" + tag).encode(), os.O_RDONLY, 0, None) >= 0:
    print("found message queue")
if libc.shmget(0x5EED, 0, 0) >= 0:
    print("found shared memory segment")
print("done")
"""


def test_next_job_finds_nothing_of_the_last(sandbox):
    """Files anywhere writable, POSIX message queues and System V shared memory are gone before the
    next job, whichever worker runs it."""
    tag = uuid.uuid4().hex[:8]
    left = sandbox.run(Job(source=_LEAVE, args=[tag]))
    assert left.outcome is Outcome.OK and "wrote" in left.stdout, left
    for _ in range(sandbox.max_workers + 1):  # every worker slot
        found = sandbox.run(Job(source=_FIND, args=[tag]))
        assert found.outcome is Outcome.OK and found.stdout == "done\n", (left.stdout, found)


_FILL = """
import errno, os, sys
where = os.path.dirname(os.path.dirname(os.getcwd())) if sys.argv[1] == "base" else sys.argv[1]
total = 0
try:
    for i in range(100_000):
        with open(os.path.join(where, f"fill-{i}"), "wb") as f:
            f.write(b"x" * (2 << 20))  # under the file size limit
        total += 2
except OSError as e:
    print(total, errno.errorcode.get(e.errno))
"""


@pytest.mark.parametrize("where", ["base", "/tmp", "/dev/shm"])
def test_scratch_is_bounded_and_a_full_one_breaks_nothing(sandbox, where):
    """Every writable folder is size-capped (no filling host memory) and emptied after the job,
    so the next job (with files and stdin to write) runs normally."""
    result = sandbox.run(Job(source=_FILL, args=[where]))
    assert result.outcome is Outcome.OK, result
    megabytes, error = result.stdout.split()
    assert error in ("ENOSPC", "EDQUOT") and int(megabytes) <= 512, result.stdout
    follow = sandbox.run(Job(source="print(open('in.txt').read() + input())", files={"in.txt": "a"}, stdin="b"))
    assert follow.outcome is Outcome.OK and follow.stdout == "ab\n", follow


@pytest.mark.parametrize(
    "source",
    [
        "import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\ntime.sleep(30)\n",
        "import os, signal, time\nos.kill(-1, signal.SIGSTOP)\ntime.sleep(30)\n",
        "import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\nos._exit(0)\n",
    ],
    ids=["stop-parent", "stop-everything", "stop-parent-and-exit"],
)
def test_a_job_cannot_stall_its_worker_past_the_deadline(sandbox, source):
    """Whatever a job does to its worker, ``run`` returns within the limit + 1 s."""
    sandbox.warm_up()  # workers replaced after earlier tests are up (their start is not this job's time)
    start = time.monotonic()
    result = sandbox.run(Job(source=source))
    elapsed = time.monotonic() - start
    assert result.outcome in (Outcome.OK, Outcome.TIMEOUT, Outcome.KILLED, Outcome.ERROR), result
    assert elapsed <= TIMEOUT + 1.0, (elapsed, result)
    follow = sandbox.run(Job(source="print(sum(range(10)))"))
    assert follow.outcome is Outcome.OK and follow.stdout == "45\n", follow


STOPPERS = [
    "import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\ntime.sleep(30)\n",
    "import os, signal, time\nos.kill(-1, signal.SIGSTOP)\ntime.sleep(30)\n",
    "import os, signal, time\nos.kill(os.getppid(), signal.SIGSTOP)\nos._exit(0)\n",
]


@pytest.mark.parametrize("where", ["run", "session"])
def test_a_stopped_worker_holds_a_job_no_longer_than_its_limit_and_half_a_second(sandbox, where):
    """In a container a job runs as its worker's uid and can SIGSTOP it (under bubblewrap it cannot): the host gives
    the worker up, and ``run`` returns, within the job's limit + 0.5 s, for a sandbox job and a session command."""
    from dataclasses import replace

    limits = replace(sandbox.limits, timeout_s=3.0)
    with sandbox.session(limits) if where == "session" else contextlib.nullcontext(sandbox) as box:
        for source in STOPPERS:
            sandbox.warm_up()  # containers restarted after the last loss are up (queueing for them is not this job's)
            box.run(Job(command=["true"]))  # and a session's worker is started
            start = time.monotonic()
            result = box.run(Job(command=["python3", "-c", source], limits=limits))
            elapsed = time.monotonic() - start
            assert elapsed <= limits.timeout_s + 0.5, (elapsed, result)
            follow = box.run(Job(command=["echo", "45"]))
            assert follow.outcome is Outcome.OK and follow.stdout == "45\n", follow


def test_an_interrupted_exchange_never_shifts_results(sandbox, monkeypatch):
    """An exception between sending a job and reading its result (Ctrl-C) discards that worker, so the
    next jobs get their own results, not the previous job's."""
    from propel.sandbox import protocol

    real = protocol.read_header
    calls = []

    def interrupted(channel, deadline):
        calls.append(1)
        if len(calls) == 1:
            time.sleep(0.3)  # the job has run and its answer is on the way
            raise KeyboardInterrupt
        return real(channel, deadline)

    monkeypatch.setattr(protocol, "read_header", interrupted)
    with pytest.raises(KeyboardInterrupt):
        sandbox.run(Job(source="print('A')"))
    monkeypatch.setattr(protocol, "read_header", real)
    outputs = [sandbox.run(Job(source=f"print({name!r})")).stdout for name in "BCDE"]
    assert outputs == ["B\n", "C\n", "D\n", "E\n"]


def test_inputs_that_fill_the_scratch_space_are_an_error_result(sandbox):
    """Stdin larger than the space for it is an error result naming the cause; the worker lives on."""
    big = b"x" * (300 << 20)  # over LocalSandbox's default 256 MB /tmp and DockerSandbox's 256 MB /work
    result, _ = run_and_check_next(sandbox, "print(len(input()))", stdin=big)
    assert result.outcome is Outcome.ERROR and "cannot write" in result.stderr, result


def test_lone_surrogates_are_the_jobs_error_not_an_exception(sandbox):
    """Text that is not encodable (a lone surrogate) fails inside the job, never out of ``run``."""
    result, _ = run_and_check_next(sandbox, "print('\udc80')\n")
    assert result.outcome is Outcome.ERROR, result
    result, _ = run_and_check_next(sandbox, "print(open('f.txt').read())", files={"f.txt": "\ud800"})
    assert result.outcome is Outcome.ERROR, result
    result = sandbox.run(Job(command=["echo", "\ud800"]))  # a model-written command: the job's error, not ours
    assert result.outcome is Outcome.ERROR and result.exit_code == 127, result
    with pytest.raises(ValueError, match=r"command\[1\] contains a NUL byte"):  # no argv can hold one: refused
        sandbox.run(Job(command=["echo", "a\x00b"]))


def test_memory_error_while_reporting_it_is_still_memory(sandbox):
    """A MemoryError that leaves no room to print its traceback is a memory outcome, not a setup failure."""
    source = (
        "blocks = []\ntry:\n    while True:\n        blocks.append(bytearray(1 << 16))\nexcept MemoryError:\n"
        "    pass\nraise ValueError('boom ' * 100_000)\n"
    )
    result, _ = run_and_check_next(sandbox, source)
    assert result.outcome is Outcome.MEMORY and result.exit_code != 121, result
