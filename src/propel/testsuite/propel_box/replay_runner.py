"""The in-sandbox runner of differential grading: the trusted side holds the clean library's recorded outcomes, the
graded side only replays calls.

For each variant in ``payload.json`` (a repair, a bug, or nothing: the clean checkout itself, which validates the
recording): write the repository's library files with the variant laid over them into a fresh workspace, leaving out
every test file (``test_globs``), start ``replay_child.py`` (a fresh interpreter: no expected outcome, no test and no
verdict is in its memory or on its disk), send it each check's request (a call's target and argument snapshots, or a
module's names) and compare what comes back with the recorded expectation here (``snapshot.same``). A check is
``same`` or ``differs`` (with the reason: another value, another exception, an error, a hang, a dead child); the
child is restarted after it dies or hangs, within the variant's time limit.
"""

import fnmatch
import os
import secrets
import shutil
import time

from propel_box import pytest_runner
from propel_box.child import Child, Gone
from propel_box.output import output_tail
from propel_box.snapshot import same

MAX_RESTARTS = 5


def _library_files(clean, variant, test_globs):
    """The checkout with the variant laid over it, without the suite's files."""
    files = {**clean, **variant}

    def is_test(path):
        return any(fnmatch.fnmatchcase(path, g) for g in test_globs)

    return {path: data for path, data in files.items() if data is not None and not is_test(path)}


class Replay:
    """One variant's checks against one (restarted as needed) child, within one time budget."""

    def __init__(self, root, files, payload):
        self.payload, self.limits = payload, payload["limits"]
        self.ws, self.tmp = os.path.join(root, secrets.token_hex(8)), os.path.join(root, secrets.token_hex(8))
        for folder in (self.ws, self.tmp):
            os.makedirs(folder)
        pytest_runner.write_files(self.ws, files)
        self.out_path = os.path.join(root, "output.txt")
        self.deadline = time.monotonic() + self.limits["timeout_s"]
        self.child, self.restarts, self.ids, self.audit, self.landlock = None, 0, 0, [], 0
        self.answers = [] if payload.get("answers") else None
        """What each replayed call returned, as the child observed it (only where the payload asks: a fingerprint
        probe's observations; grading needs the verdicts alone)."""

    def _child(self):
        if self.child is None:
            if self.restarts > MAX_RESTARTS:
                raise Gone("the graded process died or hung too often")
            self.restarts += 1
            paths = [os.path.join(self.ws, p) for p in self.payload["python_path"] if p not in (".", "")]
            env = {"PYTHONPATH": os.pathsep.join(paths)} if paths else {}  # as a user runs a source layout
            config = {"tables": self.payload.get("tables") or []}
            seed = self.payload.get("hash_seed")
            self.child = Child(
                "replay_child.py", self.ws, self.tmp, self.out_path, config, self.limits, None, env, seed
            )
            self.child.read(self.deadline)
            self.landlock = max(self.landlock, self.child.landlock)
        return self.child

    def _drop(self):
        if self.child is not None:
            self.child.close()
            self.audit += self.child.audit
            self.child = None

    def ask(self, request):
        """The child's answer, or raise ``Gone`` naming why there is none (the child is then dropped)."""
        if time.monotonic() >= self.deadline:
            raise Gone("the variant's time limit was used up")
        self.ids += 1
        deadline = min(self.deadline, time.monotonic() + self.limits["call_timeout_s"])
        try:
            child = self._child()
            return child.call(self.ids, request, deadline)
        except TimeoutError:
            self._drop()
            raise Gone("the call ran past its time limit") from None
        except Gone:
            self._drop()
            raise

    def run(self, checks, only=None, first=False):
        """``same``/``differs`` per check (the checks at indices ``only``, all by default), with the reasons;
        ``first``: stop at the first check that differs (the rest are ``skipped``)."""
        start, results, reasons = time.monotonic(), [], {}
        states = {}
        for i, check in enumerate(checks):
            if (only is not None and i not in only) or (first and reasons):
                results.append("skipped")
                continue
            try:
                if check["kind"] == "state":
                    verdict = self._state(check, states)
                else:
                    verdict = self._call(check)
            except Gone as e:
                verdict = f"no answer: {e}"
            results.append("same" if verdict is None else "differs")
            if verdict is not None:
                reasons[str(i)] = verdict[:300]
        self._drop()
        return {
            **({"answers": self.answers} if self.answers is not None else {}),
            "results": results,
            "reasons": reasons,
            "audit": self.audit[:50],
            "landlock": self.landlock,
            "restarts": max(0, self.restarts - 1),
            "wall_s": round(time.monotonic() - start, 4),
        }

    def _call(self, check):
        request = {"kind": "call", "target": check["target"], "args": check["args"], "kwargs": check["kwargs"]}
        answer = self.ask(request | ({"construct": True} if check.get("construct") else {}))
        if self.answers is not None:
            self.answers.append(answer.get("outcome"))
        if "error" in answer:
            return f"the replay failed: {str(answer['error'])[:200]}"
        expected = check["expected"]
        if not same(expected["outcome"], answer.get("outcome")):
            return "another outcome"
        if not same(expected["after"], answer.get("after")):
            return "another effect on its arguments"
        return None

    def _state(self, check, states):
        module = check["module"]
        if module not in states:
            checks = self.payload["checks"]
            names = [c["name"] for c in checks if c["kind"] == "state" and c["module"] == module]
            answer = self.ask({"kind": "state", "module": module, "names": names})
            states[module] = answer.get("state") if isinstance(answer.get("state"), dict) else {}
            if "error" in answer:
                states[module] = {"__error__": str(answer["error"])[:200]}
        got = states[module]
        if "__error__" in got and check["name"] not in got:
            return f"importing the module failed: {got['__error__']}"
        return None if same(check["expected"], got.get(check["name"])) else "another value at import"


def main():
    payload = pytest_runner.read_payload()
    clean = pytest_runner.load_files("repo")
    base = os.path.abspath("runs")
    os.makedirs(base)
    out = []
    for variant in payload["variants"]:
        root = os.path.join(base, secrets.token_hex(8))
        os.makedirs(root)
        files = _library_files(clean, variant["files"], payload["test_globs"])
        only = set(variant["only"]) if variant.get("only") is not None else None
        result = Replay(root, files, payload).run(payload["checks"], only, bool(payload.get("first")))
        result["output_tail"] = output_tail(os.path.join(root, "output.txt"))
        shutil.rmtree(root, ignore_errors=True)
        out.append(result)
    pytest_runner.write_results(out)
