"""Value grading in the local sandbox: the trusted runner evaluates each test on the plain values a fresh graded
process returns. Exceptions keep their builtin type, keyword arguments travel, a process that dies is restarted for
the next test, a hang costs only the tests it reaches, and the graded process can find no test anywhere it looks."""

from __future__ import annotations

import pytest

from propel.sandbox import LocalSandbox
from propel.testsuite.values import ValueRunner, ValueSubmission, ValueTests

PROMPT = "def f(x, scale=1):\n    '''A task.'''\n"
HELPERS = PROMPT + "\n\ndef double(y):\n    return 2 * y\n"


@pytest.fixture(scope="module")
def runner():
    with LocalSandbox(max_workers=2) as sandbox:
        yield ValueRunner(sandbox, timeout_s=3.0, batch_size=4)


def grade(runner, body: str, tests: dict[str, str], module: str = "") -> dict:
    suite = ValueTests(list(tests.items()), "f", HELPERS)
    (run,) = runner.run([ValueSubmission({"solution.py": module + PROMPT + body}, suite)])
    assert run.ok, run.reason
    return {"tests": run.tests, "reasons": run.reasons, "audit": run.audit, "run": run}


def test_values_exceptions_and_keywords(runner):
    body = (
        "    if x < 0:\n        raise ValueError('negative')\n"
        "    if x == 0:\n        class Mine(Exception):\n            pass\n        raise Mine('mine')\n"
        "    return x * scale\n"
    )
    tests = {
        "plain": "assert candidate(2) == 2",
        "keyword": "assert candidate(2, scale=3) == 6",
        "helper": "assert candidate(3) == double(3) - 3",  # the helper comes from the task's own prompt
        "expects_value_error": "try:\n    candidate(-1)\nexcept ValueError:\n    pass\nelse:\n    assert False",
        "own_exception": "candidate(0)",
        "wrong": "assert candidate(2) == 3",
    }
    got = grade(runner, body, tests)
    assert got["tests"] == {
        "plain": "passed",
        "keyword": "passed",
        "helper": "passed",
        "expects_value_error": "passed",
        "own_exception": "error",
        "wrong": "failed",
    }
    assert "Mine: mine" in got["reasons"]["own_exception"] and got["audit"] == []


def test_a_dead_process_is_restarted_and_a_hang_costs_only_what_it_reaches(runner):
    body = (
        "    import os, time\n"
        "    if x == 13:\n        os.kill(os.getpid(), 9)\n"
        "    if x == 99:\n        time.sleep(60)\n"
        "    return x\n"
    )
    tests = {"a": "assert candidate(1) == 1", "dies": "assert candidate(13) == 13", "b": "assert candidate(2) == 2"}
    tests |= {"hangs": "assert candidate(99) == 99", "after": "assert candidate(3) == 3"}
    got = grade(runner, body, tests)
    assert got["tests"] == {"a": "passed", "dies": "error", "b": "passed", "hangs": "error", "after": "error"}
    assert "killed by signal 9" in got["reasons"]["dies"] and "time limit" in got["reasons"]["hangs"]
    assert got["run"].landlock > 0


def test_values_that_are_not_plain_data_fail_with_the_reason(runner):
    """An object is not plain data; a lazy result is read once and compared as HumanEval's harness would (a list of
    it equals the list, the iterator itself equals no list)."""
    body = "    return iter([x]) if x else object()\n"
    tests = {"gen": "assert list(candidate(1)) == [1]", "obj": "assert candidate(0) is not None"}
    tests["lazy_is_not_a_list"] = "assert candidate(1) == [1]"
    got = grade(runner, body, tests)
    assert got["tests"] == {"gen": "passed", "obj": "error", "lazy_is_not_a_list": "failed"}
    assert "not plain data" in got["reasons"]["obj"]


def test_the_graded_process_holds_no_test(runner):
    """The expected value exists only in the runner: searching the graded process's heap and every file it can
    list finds nothing (the needle is assembled at run time, so the graded code's own file does not hold it), and
    the heap walk is reported."""
    body = (
        "    import gc, os\n"
        "    needle = 'needle-' + str(7000 + x)\n"
        "    for o in gc.get_objects():\n"
        "        if isinstance(o, str) and needle in o:\n            return needle\n"
        "    for top in ('/', '..', '../..', '/tmp'):\n"
        "        try:\n"
        "            for root, _, files in os.walk(top):\n"
        "                for name in files:\n"
        "                    try:\n"
        "                        if needle.encode() in open(os.path.join(root, name), 'rb').read(1 << 20):\n"
        "                            return needle\n"
        "                    except OSError:\n"
        "                        pass\n"
        "        except OSError:\n"
        "            pass\n"
        "    return 'not found'\n"
    )
    got = grade(runner, body, {"hidden": "assert candidate(319) == 'needle-7319'"})
    assert got["tests"]["hidden"] in ("failed", "error"), got  # not found, or still looking when time ran out
    assert "needle" not in got["reasons"]["hidden"], got["reasons"]
    assert {"frame_access", "reads_tests"} <= {finding[0] for finding in got["audit"]}
