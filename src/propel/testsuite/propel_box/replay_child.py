"""The graded process of differential grading: import the (repaired or buggy) library, replay recorded calls into its
functions, and send back what each call returned and did, as snapshots. Started fresh (``python3 -I -S``, never
forked from the runner): it holds no test, no expected outcome and no verdict, and its workspace holds the library
without the repository's tests.

Its first stdin line is its configuration (the library's import paths and the callback tables of the calls it will
replay); it confines itself (Landlock: its workspace and the runtime readable, a scratch folder writable) and
installs the audit hook before importing anything of the library. Then each stdin line is a request, answered by one
line on the response fd: ``call`` (rebuild the arguments, call the target's accessor, snapshot the outcome and the
arguments after it) or ``state`` (snapshots of a module's data globals right after import). Nothing here is trusted
by the runner: the library's code shares this process and may rewrite any of it; what it sends back is data the
runner compares with the clean library's.
"""

import importlib
import json
import os
import sys


def _function(targets, target):
    module, qualname, accessor = target
    owner, name = targets.owner_of(module, qualname)
    found = targets.accessors(targets.attribute(owner, name))
    if accessor not in found:
        raise LookupError(f"{module}:{qualname} has no {accessor}")
    return found[accessor]


def main():
    config = json.loads(sys.stdin.readline())
    sys.path.insert(0, config["box"])
    from propel_box import snapshot, targets
    from propel_box.graded_start import start_graded

    send, _ = start_graded(config, [os.path.join(config["ws"], p) for p in config["python_path"]])
    snaps = snapshot.Snapshots(tables=config.get("tables") or [])
    send({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        answer = {"id": request["id"]}
        try:
            if request["kind"] == "state":
                module = importlib.import_module(request["module"])
                state = targets.module_state(module, snaps)
                answer["state"] = {name: state.get(name) for name in request["names"]}
            else:
                function = _function(targets, request["target"])
                args = snaps.rebuild(request["args"])
                kwargs = snaps.rebuild(request["kwargs"])
                outcome, _ = snaps.take_outcome(lambda: function(*args, **kwargs))  # noqa: B023
                answer["outcome"] = outcome
                answer["after"] = [snaps.take(list(args)), snaps.take(dict(kwargs))]
        except BaseException as e:  # noqa: BLE001 - whatever the library does is the answer
            answer["error"] = f"{type(e).__name__}: {str(e)[:200]}"
        send(answer)


if __name__ == "__main__":
    main()
