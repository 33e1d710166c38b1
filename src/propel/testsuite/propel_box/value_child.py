"""The graded process of value grading: import the model's module, then answer ``candidate(*args)`` calls with plain
data. Started fresh as a user's plain ``python3 -c`` run (``graded_start``: never forked from the runner, so it
holds no test and no expected value, and nothing in it tells graded code that it is graded).

The loader (its first stdin line) imports this module and calls ``start``, which confines the child (Landlock: the
workspace writable, the interpreter's runtime readable; the audit hook) and hands ``BOOT`` the calls to make: first
``import <module>``, then one ``candidate(*args, **kwargs)`` per stdin line. Each is answered by one framed record on
stdout: the value (``codec.encode``), the exception it raised, or why the value is not plain data. Audit findings
are sent the same way as they happen. Nothing here is trusted by the runner: the model's code shares this process
and may rewrite any of it; what it can send back is plain data, and plain data is judged by the runner.
"""

import json
import sys

from propel_box import codec
from propel_box.graded_start import GradedCalls, start_graded


def _failure(error):
    try:
        message = str(error)[:300]
    except BaseException:  # noqa: BLE001 - an exception whose own __str__ raises
        message = ""
    return {"raised": type(error).__name__, "message": message, "base": not isinstance(error, Exception)}


class _Calls(GradedCalls):
    """Import the model's module, then one ``candidate(*args, **kwargs)`` per request."""

    def __init__(self, config, send, graded_dir, main):
        self.graded_dir = graded_dir
        self.module, self.entry = config["module"], config["entry"]
        super().__init__(send, main)

    def _steps(self):
        yield __import__, (self.module,), {}
        function, failure = None, _failure(self.error) if self.error is not None else None
        if failure is None:
            try:
                function = getattr(sys.modules[self.module], self.entry)
                self.main.bind(self.module)
            except BaseException as e:  # noqa: BLE001 - whatever the module does at import is the answer
                failure = _failure(e)
        self.send({"ready": failure is None, **({"import": failure} if failure else {})})
        for line in iter(self.readline, ""):
            request = self.loads(line)
            answer = {"id": request["id"]}
            if function is None:
                self.send({**answer, **(failure or {"raised": "ImportError", "message": "no entry point"})})
                continue
            try:
                args, kwargs = codec.decode(request["args"]), codec.decode(request["kwargs"])
            except BaseException as e:  # noqa: BLE001
                self.send({**answer, **_failure(e)})
                continue
            yield function, args, kwargs
            self.send(self._answer(answer))
        raise SystemExit(0)

    def _answer(self, answer):
        if self.error is not None:
            return {**answer, **_failure(self.error)}
        value = self.result
        try:
            answer["value"] = codec.encode(value)
        except codec.NotPlain as e:
            answer["not_plain"] = str(e)[:300]
        except BaseException as e:  # noqa: BLE001 - a value whose own methods raise while being read
            answer["not_plain"] = f"reading the value raised {type(e).__name__}"
        try:
            answer["own_eq"] = codec.own_equality(value, self.graded_dir)
        except BaseException:  # noqa: BLE001
            answer["own_eq"] = True
        self.result = None
        return answer


def start(boot, baseline, path, text):
    """Called by the loader: confine this child and give ``boot`` (``BOOT``'s globals) its calls."""
    config = json.loads(text)
    calls = _Calls(config, *start_graded(config, baseline, path))
    boot["next"], boot["returned"], boot["raised"] = calls.next, calls.returned, calls.raised
