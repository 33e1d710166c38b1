"""The in-sandbox runner of value grading: the trusted side holds the tests, the graded side only computes values.

For each submission in ``payload.json``: write the model's files into a fresh workspace, start ``value_child.py``
(a fresh interpreter, so nothing of this process's memory, tests included, is in it), then run each test's code
here with ``candidate`` bound to a proxy: every call sends its arguments to the child and returns the plain value
that comes back (``codec.decode``: exact builtin types only). The test's own assertions, helpers (the task's
pristine prompt) and comparisons run here, on plain data, where no code of the model's exists; no pytest, no report
and no test file is within the child's reach. A call that raised in the child raises here (a builtin exception of
the same name, else ``CandidateError``); a value that is not plain data, a dead or hung child, fail the test with
the reason. The child is restarted after it dies, within the submission's time limit.
"""

import ast
import base64
import builtins
import contextlib
import json
import os
import secrets
import shutil
import sys
import time

from propel_box import codec
from propel_box.child import Child, Gone
from propel_box.output import output_tail

MAX_RESTARTS = 3


class CandidateError(Exception):
    """The candidate failed in the graded process (a non-builtin exception, a dead or hung process, bad value)."""


def _raised(record):
    name = str(record.get("raised", "Exception"))
    message = str(record.get("message", ""))
    kind = getattr(builtins, name, None)
    if isinstance(kind, type) and issubclass(kind, Exception) and not issubclass(kind, (Warning,)):
        try:
            return kind(message)
        except Exception:
            pass
    return CandidateError(f"{name}: {message}")


class Grader:
    """Runs one submission's tests against a (restarted as needed) child, within one time budget."""

    def __init__(self, root, sub, limits):
        self.sub, self.limits = sub, limits
        self.ws, self.tmp = os.path.join(root, secrets.token_hex(8)), os.path.join(root, secrets.token_hex(8))
        for folder in (self.ws, self.tmp):
            os.makedirs(folder)
        for name, data in sub["files"].items():
            path = os.path.join(self.ws, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(base64.b64decode(data))
        self.out_path = os.path.join(root, "output.txt")
        self.deadline = time.monotonic() + limits["timeout_s"]
        self.child, self.restarts, self.calls, self.audit, self.landlock = None, 0, 0, [], 0
        self.flags, self.import_error = [], None

    def _child(self):
        if self.child is None:
            if self.restarts > MAX_RESTARTS:
                raise CandidateError("the graded process died too often")
            self.restarts += 1
            config = {"module": self.sub["module"], "entry": self.sub["entry"], "threads": True}
            child = Child("value_child.py", self.ws, self.tmp, self.out_path, config, self.limits, max_processes=None)
            self.child = child
            ready = child.read(self.deadline)
            self.landlock = max(self.landlock, child.landlock)
            if not ready.get("ready"):
                self.import_error = ready.get("import") or {}
        return self.child

    def _drop(self, reason):
        if self.child is not None:
            self.child.close()
            self.audit += self.child.audit
            self.child = None
        return CandidateError(reason)

    def candidate(self, *args, **kwargs):
        if time.monotonic() >= self.deadline:
            raise CandidateError("the submission's time limit was used up")
        self.calls += 1
        try:
            encoded = codec.encode(list(args)), codec.encode(dict(kwargs))
        except codec.NotPlain as e:
            raise CandidateError(f"the test passes an argument that is not plain data: {e}") from None
        try:
            child = self._child()
            record = child.call(self.calls, {"args": encoded[0], "kwargs": encoded[1]}, self.deadline)
        except TimeoutError:
            raise self._drop("the candidate ran past the submission's time limit") from None
        except Gone as e:
            if "exited with status" in str(e):
                self.flags.append(["early_exit", "exit", "", str(e)])
            raise self._drop(str(e)) from None
        if record.get("own_eq"):
            self.flags.append(["custom_eq", "value", "", "a returned object defines its own equality"])
        if "raised" in record:
            if record.get("base"):
                self.flags.append(["early_exit", "raise", "", f"raised {record.get('raised')} (a BaseException)"])
            raise _raised(record)
        if "not_plain" in record:
            raise CandidateError(f"the returned value is not plain data: {record['not_plain']}")
        try:
            return codec.decode(record.get("value"))
        except codec.BadValue as e:
            raise CandidateError(f"the returned value is malformed: {e}") from None

    def _call(self, source):
        """What the candidate returns for one argument tuple (the task's own literal, read here): ``["value",
        tagged]``, ``["raise", name]`` or ``["error", why]``."""
        try:
            args = ast.literal_eval(source)
            value = self.candidate(*args)
            return ["value", codec.encode(value)]
        except CandidateError as e:
            return ["error", str(e)[:200]]
        except Exception as e:  # the candidate's exception, re-raised here
            return ["raise", type(e).__name__]

    def run_test(self, body):
        namespace = {"__name__": "__propel_test__"}
        exec(compile(self.sub.get("helpers", ""), "<task>", "exec"), namespace)
        exec(compile(self.sub.get("preamble", ""), "<preamble>", "exec"), namespace)
        namespace["candidate"] = self.candidate
        exec(compile(body, "<test>", "exec"), namespace)

    def run(self):
        start, outcomes, reasons = time.monotonic(), {}, {}
        for name, body in self.sub["tests"]:
            try:
                self.run_test(body)
                outcomes[name] = "passed"
            except AssertionError as e:
                outcomes[name], reasons[name] = "failed", f"assertion failed {str(e)[:200]}".strip()
            except CandidateError as e:
                outcomes[name], reasons[name] = "error", str(e)[:300]
            except Exception as e:  # the candidate's exception (re-raised here) or the test's own error
                outcomes[name], reasons[name] = "error", f"{type(e).__name__}: {str(e)[:200]}"
        returned = [self._call(source) for source in self.sub.get("calls") or []]
        if self.child is not None:
            self._drop("done")
        if self.import_error and self.import_error.get("base"):
            self.flags.append(["early_exit", "import", "", f"raised {self.import_error.get('raised')} at import"])
        findings = []
        for item in self.audit + self.flags:
            if item not in findings:
                findings.append(item)
        return {
            "tests": outcomes,
            "reasons": reasons,
            "returned": returned,
            "import_error": self.import_error,
            "audit": findings,
            "landlock": self.landlock,
            "restarts": max(0, self.restarts - 1),
            "wall_s": round(time.monotonic() - start, 4),
        }


def main():
    with open("payload.json", encoding="utf-8") as f:
        payload = json.load(f)
    os.unlink("payload.json")
    work = os.getcwd()
    with contextlib.suppress(OSError):
        os.unlink(os.path.join(os.path.dirname(work), "stdin"))  # fd 0 stays open here; no child can open it
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0: /proc/<this pid> is closed to the children
    base = os.path.abspath("runs")
    os.makedirs(base)
    results = []
    for sub in payload["submissions"]:
        root = os.path.join(base, secrets.token_hex(8))
        os.makedirs(root)
        result = Grader(root, sub, payload["limits"]).run()
        result["output_tail"] = output_tail(os.path.join(root, "output.txt"))
        shutil.rmtree(root, ignore_errors=True)
        results.append(result)
    token = sys.stdin.read().strip()
    sys.stdout.write(token + json.dumps(results) + token + "\n")
    sys.stdout.flush()
