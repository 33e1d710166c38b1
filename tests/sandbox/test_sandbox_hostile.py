"""Hostile programs on every backend: each ends in the right outcome within its limits, the host is unchanged, and the
next job on the same sandbox runs normally."""

from __future__ import annotations

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
    source = "import os, signal, time\nos.kill(os.getppid(), signal.SIGKILL)\ntime.sleep(5)\n"
    result, elapsed = run_and_check_next(sandbox, source)
    assert result.outcome is Outcome.KILLED
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
