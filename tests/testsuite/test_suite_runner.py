"""The hardened suite runner in the local sandbox: the run's own account of each test (equal to pytest's JUnit report
on honest code), exit codes, and solutions that crash, hang, flood their output, eat memory or kill the runner come
back as a status with a reason (never an exception)."""

from __future__ import annotations

import pytest

from propel.sandbox import LocalSandbox
from propel.sandbox.job import Limits
from propel.testsuite import ReportError, Submission, SuiteRunner, parse_junit, pristine_ini
from propel.testsuite.propel_box.confine import SCOPED_ABI
from propel.testsuite.runner import encode_files, read_suite_record
from propel.testsuite.shipping import framed_records, job

TESTS = {
    "pytest.ini": pristine_ini(),
    "test_add.py": (
        "import pytest\nfrom solution import add\n\n"
        "def test_one():\n    assert add(1, 2) == 3\n\n"
        "def test_two():\n    assert add(2, 2) == 4\n\n"
        "@pytest.mark.skip\ndef test_skipped():\n    assert add(0, 0) == 0\n"
    ),
}


def sub(code: str) -> Submission:
    return Submission({"solution.py": code}, TESTS)


@pytest.fixture(scope="module")
def runner():
    with LocalSandbox(max_workers=2) as sandbox:
        yield SuiteRunner(sandbox, timeout_s=3.0, batch_size=4)


def test_junit_outcomes_and_refusals():
    xml = (
        '<testsuites><testsuite name="pytest"><testcase name="a" /><testcase name="b"><failure message="x"/>'
        '</testcase><testcase name="c"><skipped/></testcase><testcase name="d"><error/></testcase>'
        '<testcase name="a"><error/></testcase></testsuite></testsuites>'
    )
    assert parse_junit(xml) == {"a": "error", "b": "failed", "c": "skipped", "d": "error"}
    with pytest.raises(ReportError, match="DOCTYPE"):
        parse_junit('<!DOCTYPE x [<!ENTITY a "aaaa">]><testsuites/>')
    with pytest.raises(ReportError, match="well-formed"):
        parse_junit("<testsuites><testcase")
    with pytest.raises(ReportError, match="root"):
        parse_junit("<html/>")


def test_runs_report_outcomes_and_failures(runner):
    cases = {
        "correct": "def add(a, b):\n    return a + b\n",
        "partial": "def add(a, b):\n    if a == 1:\n        return 3\n    if a > 100:\n        return -1\n"
        "    return 0\n",
        "syntax": "def add(a, b)\n    return a + b\n",
        "raises_at_import": "raise RuntimeError('boom')\n",
        "hangs": "def add(a, b):\n    while True:\n        pass\n",
        "floods": "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
        "eats_memory": "blob = bytearray(4 << 30)\n",
        "os_exit": "import os\nos._exit(0)\n",
        "kills_runner": "import os\nos.kill(os.getppid(), 9)\n",
        "forks": "import os\nos.fork()\ndef add(a, b):\n    return a + b\n",
        "correct_after": "def add(a, b):\n    return a + b\n",
    }
    runs = dict(zip(cases, runner.run([sub(c) for c in cases.values()]), strict=True))
    expected = {"test_one": "passed", "test_two": "passed", "test_skipped": "skipped"}  # skipped is not passed
    assert runs["correct"].ok and runs["correct"].by_name() == expected and runs["correct"].ended
    assert runs["correct"].report_tests == runs["correct"].tests  # honest code: both accounts agree
    assert runs["correct"].landlock > 0
    assert not runs["correct"].tampered and not runs["correct"].audit and not runs["correct"].forged
    partial = runs["partial"].by_name()
    assert partial["test_one"] == "passed" and partial["test_two"] == "failed"
    for name in ("syntax", "raises_at_import"):
        assert runs[name].status == "pytest_exit" and runs[name].exit_code == 2, runs[name]
        assert "collection" in runs[name].reason
    assert runs["hangs"].status == "timeout"
    assert runs["floods"].status == "killed" and "SIGXFSZ" in runs["floods"].reason
    assert runs["eats_memory"].status in ("pytest_exit", "killed") and not runs["eats_memory"].ok
    assert runs["os_exit"].status == "no_report"
    if runs["correct"].landlock >= SCOPED_ABI:  # the runner is outside the child's Landlock domain: EPERM
        assert runs["kills_runner"].status == "pytest_exit" and "PermissionError" in runs["kills_runner"].output_tail
        assert ("early_exit", "os.kill") in {a[:2] for a in runs["kills_runner"].audit}
    else:
        assert runs["kills_runner"].status == "runner" and "killed its test runner" in runs["kills_runner"].reason
    assert runs["forks"].status == "pytest_exit"  # RLIMIT_NPROC 0: a submission cannot start processes
    # a submission after the one that killed the runner (same batch at first) is still graded on its own
    assert runs["correct_after"].ok and runs["correct_after"].by_name()["test_two"] == "passed"


def test_the_tests_are_out_of_reach_once_collected(runner):
    """Landlock: the graded code can neither list the folders around its workspace (where the tests are) nor write
    outside its scratch folder; each attempt is also an audit finding."""
    probe = (
        "import glob, os\n"
        "def add(a, b):\n"
        "    out = []\n"
        "    out += glob.glob('../*/test_add.py')\n"
        "    try:\n"
        "        open('../escape.txt', 'w').close()\n"
        "        out.append('wrote')\n"
        "    except OSError:\n"
        "        pass\n"
        "    return a + b if not out else -1\n"
    )
    (run,) = runner.run([sub(probe)])
    assert run.ok and run.by_name()["test_one"] == "passed", run.output_tail
    flags = {finding[0] for finding in run.audit}
    assert {"reads_tests", "writes_outside"} <= flags, run.audit


LINGERS = """import os, signal, time
if os.fork() == 0:  # a process in a session of its own outlives the session kill; it signals every later pid
    os.setsid()
    me, end = os.getpid(), time.time() + 6
    while time.time() < end:
        for pid in range(me + 1, me + 300):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)
    os._exit(0)
def add(a, b):
    return a + b
"""


def test_nothing_a_graded_child_starts_reaches_the_next_suite():
    """A suite whose tests may start threads (a repository's: ``max_processes`` > 0) lets graded code fork: what it
    leaves behind is killed before the next suite starts and reported, and its signals never leave its own
    Landlock domain, so the next submission in the same job is graded on its own."""
    slow = {
        **TESTS,
        "test_slow.py": "import time\nfrom solution import add\n\ndef test_slow():\n    "
        "time.sleep(1.0)\n    assert add(1, 1) == 2\n",
    }
    args = ["-c", "{tests}/pytest.ini", "--rootdir", "{tests}", "--confcutdir", "{tests}", "{tests}"]
    suites = [
        {"files": encode_files({"solution.py": code}), "tests": encode_files(slow), "args": args}
        for code in (LINGERS, "def add(a, b):\n    return a + b\n")
    ]
    limits = {"timeout_s": 8.0, "memory_mb": 512, "max_file_bytes": 4 << 20, "max_processes": 8}
    grading, token = job("pytest_runner", {"limits": limits, "suites": suites}, Limits(timeout_s=40.0), pytest=True)
    with LocalSandbox(max_workers=1) as sandbox:
        result = sandbox.run_many([grading])[0]
    records = framed_records(result.stdout, token, 2)
    assert records is not None, (result.outcome, result.stderr[-2000:])
    lingers, honest = (read_suite_record(r) for r in records)
    assert honest.ok and honest.by_name()["test_slow"] == "passed", honest
    assert not honest.audit
    assert ("spawns_processes", "os.fork") in {a[:2] for a in lingers.audit}
    assert ("spawns_processes", "outlived") in {a[:2] for a in lingers.audit}, lingers.audit


def test_test_ids_do_not_depend_on_the_order_of_a_parameter_list():
    """pytest's auto-id of a parameter it cannot render is its index: a list built from a set changes it from run to
    run, so the stable id drops it; tests that then share an id count as one, passed only if all passed."""
    from propel.testsuite.runner import stable_outcomes, stable_test_id

    assert stable_test_id("tests.t::test_format[4-19-expected19-%C]") == "tests.t::test_format[4-19-expected#-%C]"
    assert stable_test_id("t::x[case2]") == "t::x[case#]" and stable_test_id("t::plain") == "t::plain"
    assert stable_test_id("t::z[1-2]") == "t::z[1-2]"  # rendered values stay
    assert stable_outcomes({"a[x1]": "passed", "a[x2]": "failed", "b": "passed"}) == {"a[x#]": "failed", "b": "passed"}
