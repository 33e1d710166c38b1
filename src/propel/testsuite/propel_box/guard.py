"""The pytest plugin a graded child registers before any model-written code runs: the run's own account of itself.

For every test phase it records the raw outcome of the call (``CallInfo.excinfo``: did the test function raise?),
not the report pytest builds from it, so patching how reports are made, kept or written (``TestReport``,
``junitxml``, ``ET.tostring``) changes the JUnit file but not this account. It also records what was collected, an
exception that is not an ``Exception`` (an attempt to end the run), the integrity check (``integrity.changes``: the
runner's code rebound since the snapshot) after collection and at the end of the session (with the collected test
functions' code objects), and a closing ``end`` record that a run cut short (``os._exit``, a killed pytest) never
writes. Everything goes through the authenticated ``channel``. Hook functions are bound here, at registration, so
rebinding this module's attributes later changes nothing.
"""

import pytest
from _pytest.junitxml import mangle_test_address
from _pytest.outcomes import OutcomeException, Skipped
from propel_box import integrity


def test_key(nodeid, mangle=mangle_test_address):
    """``classname::name`` as pytest's JUnit XML writes it (the key the trainer compares both accounts by)."""
    names = mangle(nodeid)
    return ".".join(names[:-1]) + "::" + names[-1]


def make_guard(send, check, on_collected=None, test_module=None):
    """The plugin object. ``send(kind, *fields)``: the channel; ``check()``: the integrity changes since the
    snapshot; ``on_collected()``: runs once collection is done (the runner hides the test files then);
    ``test_module(module)``: is this a module of the suite (snapshotted once collected, compared at the end)."""
    key, skipped, outcome_exception, sent_changes = test_key, Skipped, OutcomeException, set()
    snapshot, changes = integrity.snapshot, integrity.changes
    state = {"items": [], "module": None}

    def report_changes(when):
        for change in check():
            if change not in sent_changes:
                sent_changes.add(change)
                send("tampered", when, change)

    class Guard:
        @pytest.hookimpl(hookwrapper=True, tryfirst=True)
        def pytest_runtest_makereport(self, item, call):
            yield  # after every implementation: pytest's unittest support moves a TestCase's error into the call
            error = call.excinfo
            if error is None:
                raw = "passed"
            elif isinstance(error.value, skipped):
                raw = "skipped"
            else:
                raw = "failed" if call.when == "call" else "error"
            send("phase", key(item.nodeid), call.when, raw)

        def _watch(self, item):
            outcome = yield
            error = outcome.excinfo
            if error is not None and not isinstance(error[1], (Exception, outcome_exception)):
                name = type(error[1]).__name__
                send("audit", "early_exit", "raise", "", f"{item.name}: raised {name}, not an Exception")
            elif error is not None and type(error[1]).__name__ == "OwnEquality":  # the suite's plain-value check
                send("audit", "custom_eq", "value", "", f"{item.name}: {str(error[1])[:120]}")

        pytest_runtest_setup = pytest.hookimpl(hookwrapper=True, tryfirst=True)(_watch)
        pytest_runtest_call = pytest.hookimpl(hookwrapper=True, tryfirst=True)(_watch)
        pytest_runtest_teardown = pytest.hookimpl(hookwrapper=True, tryfirst=True)(_watch)

        @pytest.hookimpl(tryfirst=True)
        def pytest_collection_finish(self, session):
            state["items"] = [item.nodeid for item in session.items]
            state["code"] = [
                (item.nodeid, obj, obj.__code__) for item in session.items if hasattr(obj := item.obj, "__code__")
            ]
            send("collected", *[key(nodeid) for nodeid in state["items"]])
            report_changes("collection")
            if test_module is not None:
                state["tests"] = snapshot(only=test_module)
            if on_collected is not None:
                on_collected()

        @pytest.hookimpl(trylast=True)
        def pytest_sessionfinish(self, session, exitstatus):
            report_changes("session end")
            if test_module is not None and "tests" in state:
                for change in changes(state["tests"], only=test_module):
                    send("tampered", "session end", change)
            for nodeid, obj, code in state.get("code", ()):
                if obj.__code__ is not code:
                    send("tampered", "session end", f"the code of test {nodeid} was swapped")
            send("end", str(len(state["items"])), str(int(exitstatus)))

    return Guard()


def outcomes(records):
    """``{key: outcome}`` from the phase records: an ``error`` in setup or teardown wins, then the call's result."""
    phases = {}
    for kind, fields in records:
        if kind == "phase" and len(fields) == 3:
            phases.setdefault(fields[0], {})[fields[1]] = fields[2]
    out = {}
    for test, seen in phases.items():
        values = set(seen.values())
        if "error" in values:
            out[test] = "error"
        elif seen.get("setup") == "skipped" or seen.get("call") == "skipped":
            out[test] = "skipped"
        else:
            out[test] = seen.get("call", "error")
    return out
