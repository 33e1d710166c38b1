"""The graded process of differential grading: import the (repaired or buggy) library, replay recorded calls into its
functions, and send back what each call returned and did, as a caller sees it. Started fresh as a user's plain
``python3 -c`` run (``graded_start``: never forked from the runner): it holds no test, no expected outcome and no
verdict, its workspace holds the library without the repository's tests, and nothing in it tells graded code that
it is graded.

The loader (its first stdin line) imports this module and calls ``start``, which confines the child (Landlock, the
audit hook) before anything of the library is imported. Then each stdin line is a request, answered by one framed
record on stdout: ``call`` (rebuild the arguments, objects by calling their classes as a user would, and have
``BOOT`` make the call; observe the outcome and the arguments after it) or ``state`` (a module's data globals right
after import, as ``BOOT`` imports it). Nothing here is trusted by the runner: the library's code shares this process
and may rewrite any of it; what it sends back is data the runner compares with the clean library's.
"""

import json
import sys

from propel_box import snapshot, targets
from propel_box.graded_start import GradedCalls, start_graded


def _function(target):
    module, qualname, accessor = target
    owner, name = targets.owner_of(module, qualname)
    found = targets.accessors(targets.attribute(owner, name))
    if accessor not in found:
        raise LookupError(f"{module}:{qualname} has no {accessor}")
    return found[accessor]


def _error(error):
    try:
        return f"{type(error).__name__}: {str(error)[:200]}"
    except BaseException:  # noqa: BLE001 - an exception whose own __str__ raises
        return type(error).__name__


class _Calls(GradedCalls):
    """Rebuild each recorded call's arguments and replay it into the library."""

    def __init__(self, config, send, main):
        self.snaps = snapshot.Snapshots(tables=config.get("tables") or [])
        super().__init__(send, main)

    def _import(self, module):
        """The import as a user's ``import module`` makes it, from ``BOOT``'s frame (once per module)."""
        if module not in sys.modules:
            yield __import__, (module,), {}
            if self.error is not None:
                raise self.error
            self.main.bind(module)

    def _steps(self):
        self.send({"ready": True})
        for line in iter(self.readline, ""):
            request = self.loads(line)
            answer = {"id": request["id"]}
            try:
                if request["kind"] == "state":
                    yield from self._import(request["module"])
                    state = targets.module_state(sys.modules[request["module"]], self.snaps)
                    answer["state"] = {name: state.get(name) for name in request["names"]}
                else:
                    yield from self._import(request["target"][0])
                    answer.update((yield from self._call(request)))
            except BaseException as e:  # noqa: BLE001 - whatever the library does is the answer
                answer["error"] = _error(e)
            self.send(answer)
        raise SystemExit(0)

    def _call(self, request):
        function = _function(request["target"])
        args = self.snaps.rebuild(request["args"])
        kwargs = self.snaps.rebuild(request["kwargs"])
        if request.get("construct"):  # a constructor's call: its class called, as a user makes the object
            cls, args = args[0], args[1:]
            yield cls, args, kwargs
            made = self.result
            args = [made, *args]
        else:
            yield function, args, kwargs
        if self.error is not None:
            if not isinstance(self.error, Exception):
                raise self.error
            outcome = ["raise", *snapshot.exception_name(self.error)]
        else:
            outcome, _ = self.snaps.outcome(None if request.get("construct") else self.result)
        self.result = self.error = None
        return {"outcome": outcome, "after": [self.snaps.observe(list(args)), self.snaps.observe(dict(kwargs))]}


def start(boot, baseline, path, text):
    """Called by the loader: confine this child and give ``boot`` (``BOOT``'s globals) its calls."""
    config = json.loads(text)
    send, _, main = start_graded(config, baseline, path)
    calls = _Calls(config, send, main)
    boot["next"], boot["returned"], boot["raised"] = calls.next, calls.returned, calls.raised
