"""Runs task code on literal inputs inside the sandbox and prints tagged, JSON-encoded outputs.

This file is shipped as the sandbox job's source (stdlib only). The request comes on stdin as JSON, so model-written
inputs are never pasted into code: each input is a ``repr`` of an argument tuple, read back with ``ast.literal_eval``.
Each input runs in a fresh namespace (no state leaks between calls), with an import hook that admits only the
allowlisted modules. The last stdout line is ``MARKER`` + JSON ``{"hash": ..., "results": [...]}``.
"""

import ast
import builtins
import io
import json
import sys

MARKER = "__PROPEL_RESULT__"


def encode(value, depth=0):
    """Tagged JSON form of a value, so that comparison is by value (NaN, big ints, sets, dicts) and never by text."""
    if depth > 50:
        raise ValueError("value nested too deeply")
    if value is None:
        return ["none"]
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int):
        return ["int", str(value)]
    if isinstance(value, float):
        return ["float", repr(value)]
    if isinstance(value, complex):
        return ["complex", repr(value.real), repr(value.imag)]
    if isinstance(value, str):
        return ["str", value]
    if isinstance(value, bytes):
        return ["bytes", value.hex()]
    if isinstance(value, tuple):
        return ["tuple", [encode(v, depth + 1) for v in value]]
    if isinstance(value, list):
        return ["list", [encode(v, depth + 1) for v in value]]
    if isinstance(value, (set, frozenset)):
        items = [encode(v, depth + 1) for v in value]
        return ["set", sorted(items, key=lambda item: json.dumps(item, sort_keys=True))]
    if isinstance(value, dict):
        return ["dict", [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]]
    return ["repr", type(value).__name__, repr(value)]


def _guarded_import(allowed):
    real_import = builtins.__import__

    def guarded(name, globals=None, locals=None, fromlist=(), level=0):
        if level or name.split(".")[0] not in allowed:
            raise ImportError("import of " + repr(name) + " is not allowed")
        return real_import(name, globals, locals, fromlist, level)

    return guarded


def run(request):
    """Call ``request['func']`` from ``request['source']`` on each input; ``["ok", enc]`` or ``["error", text]``."""
    safe_builtins = dict(vars(builtins))
    safe_builtins["__import__"] = _guarded_import(set(request["allowed"]))
    for name in ("open", "eval", "exec", "compile", "input", "breakpoint", "exit", "quit", "help"):
        safe_builtins.pop(name, None)
    code = compile(request["source"], "task.py", "exec")
    results = []
    for text in request["inputs"]:
        namespace = {"__builtins__": safe_builtins, "__name__": "task"}
        captured = io.StringIO()
        sys.stdout = captured
        try:
            exec(code, namespace)
            args = ast.literal_eval(text)
            results.append(["ok", encode(namespace[request["func"]](*args))])
        except (Exception, SystemExit) as err:  # the task's failure is data, not a harness crash
            results.append(["error", type(err).__name__ + ": " + str(err)[:200]])
        finally:
            sys.stdout = sys.__stdout__
    return results


def main():
    request = json.loads(sys.stdin.read())
    sys.setrecursionlimit(2000)
    results = run(request)
    sys.stdout.write("\n" + MARKER + json.dumps({"hash": hash("propel-hash-probe"), "results": results}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
