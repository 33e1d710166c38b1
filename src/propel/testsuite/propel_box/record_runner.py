"""The in-sandbox recorder of differential grading: the repository's own suite, run on its *clean* checkout, with a
recorder around each target function (trusted: no model-written code is in this job).

Each call the suite makes into a target, directly or through other library code, is kept as snapshots
(``snapshot.Snapshots``): the arguments before the call (``take``: rebuilt where the call is replayed), the outcome
(the returned value, a lazy iterator's first items, or the exception's class) and the arguments after it (what the
call did to ``self`` and to mutable arguments), both as a caller sees them (``observe``). Every library class's
constructor is recorded too, so an object passed to a target is rebuilt by calling its class with the arguments
that made it, as a user's program would, never from its private state; a call of a target ``__init__`` is kept as
the construction it is. A test's own callables (lambdas, helpers) become callbacks with recorded tables; test
modules are never referenced. For each module of the targets, its data globals right after import are kept too (a
function that only runs at import time, such as a table builder, shows there). Recorders are installed when pytest
configures, before collection, on the target's own name and on every library reference to the same function
(re-exports, class aliases, closures). A call a snapshot's own reads make (a property, ``repr`` or descriptor that
runs a target) is part of reading, as what consuming a result calls is part of its call: it passes unrecorded.

The runner does not judge anything: ``replay_runner`` replays these calls in a graded child and compares there.
"""

import contextlib
import fnmatch
import functools
import importlib
import json
import os
import sys
import types

from propel_box import pytest_runner
from propel_box.snapshot import NoSnapshot, Snapshots, exception_name, is_lazy
from propel_box.targets import accessors, attribute, module_state, owner_of, rewrapped

MAX_CALLS = 300
"""Distinct calls kept per target."""
MAX_ATTEMPTS = 1_000
"""Calls per target the recorder looks at (kept, repeated or without a snapshot) before it lets the rest pass: a
test that calls a target a million times on a large object costs the recording nothing after that."""
MAX_SKIPS = 8
"""Distinct reasons kept per target for calls that could not be snapshotted."""


class Recorder:
    """Records the calls into the targets (``records[key]``), where ``key`` is ``module:qualname:accessor``."""

    def __init__(self, snaps):
        self.snaps = snaps
        self.records, self.seen, self.skips = {}, {}, {}

    def wrap(self, key, function):
        construct = key.endswith(".__init__:call")
        records = self.records.setdefault(key, [])
        seen = self.seen.setdefault(key, set())
        skips = self.skips.setdefault(key, {})
        snaps, depth, attempts = self.snaps, [0], [0]

        def skip(reason):
            if len(skips) < MAX_SKIPS or reason in skips:
                skips[reason] = skips.get(reason, 0) + 1

        @functools.wraps(function)
        def recorder(*args, **kwargs):
            if len(records) >= MAX_CALLS or depth[0] or attempts[0] >= MAX_ATTEMPTS or snaps.reading:
                return function(*args, **kwargs)
            attempts[0] += 1
            args = [snaps.stand_in(a) for a in args]
            kwargs = {k: snaps.stand_in(v) for k, v in kwargs.items()}
            try:
                if construct and args:  # self is not made yet: what is replayed is its class called
                    before = [snaps.take([type(args[0]), *args[1:]]), snaps.take(dict(kwargs))]
                else:
                    before = [snaps.take(list(args)), snaps.take(dict(kwargs))]
            except NoSnapshot as e:
                skip(str(e)[:100])
                return function(*args, **kwargs)
            try:
                result = function(*args, **kwargs)
            except Exception as error:
                self._keep(records, seen, before, ["raise", *exception_name(error)], args, kwargs, skip, construct)
                raise
            outcome = None
            try:
                depth[0] += 1  # what consuming the result calls is part of this call, not a call of its own
                if is_lazy(result):
                    tree, items, exhausted = snaps.take_iterator(result)
                    result = _chain(items, None if exhausted else result)
                    outcome = ["value", tree]
                else:
                    outcome = ["value", snaps.observe(result)]
            except NoSnapshot as e:
                skip("returns: " + str(e)[:90])
            except Exception as e:  # consuming a lazy result raised: the caller will see it when it reads on
                skip(f"reading the result raised {type(e).__name__}")
            finally:
                depth[0] -= 1
            if outcome is not None:
                self._keep(records, seen, before, outcome, args, kwargs, skip, construct)
            return result

        recorder.__propel_recorder__ = True  # the sweep leaves its closure (which holds the original) alone
        return recorder

    def _keep(self, records, seen, before, outcome, args, kwargs, skip, construct=False):
        try:
            after = [self.snaps.observe(list(args)), self.snaps.observe(dict(kwargs))]
        except NoSnapshot as e:
            skip("after: " + str(e)[:90])
            return
        ident = json.dumps(before, sort_keys=True)
        if ident in seen:
            return
        seen.add(ident)
        record = {"args": before[0], "kwargs": before[1], "outcome": outcome, "after": after}
        records.append(record | ({"construct": True} if construct else {}))


def _chain(items, rest):
    yield from items
    if rest is not None:
        yield from rest


def _library_modules(roots):
    return [m for name, m in list(sys.modules.items()) if m is not None and name.split(".")[0] in roots]


def _sweep(roots, old, new):
    """Every library reference to ``old`` (module globals, class dicts, closure cells) made a reference to ``new``."""
    for module in _library_modules(roots):
        for name, value in list(vars(module).items()):
            if value is old:
                setattr(module, name, new)
            elif isinstance(value, type) and value.__module__.split(".")[0] in roots:
                for attr, item in list(value.__dict__.items()):
                    if item is old:
                        with contextlib.suppress(AttributeError, TypeError):
                            setattr(value, attr, new)
            elif (
                isinstance(value, types.FunctionType)
                and value.__closure__
                and not hasattr(value, "__propel_recorder__")
            ):
                for cell in value.__closure__:
                    with contextlib.suppress(ValueError):
                        if cell.cell_contents is old:
                            cell.cell_contents = new


def record_constructors(roots, snaps, is_test):
    """Every library class with a constructor of its own records the calls that make its instances
    (``Snapshots.constructed``): the objects later passed to a target are rebuilt by calling their class again.
    Function arguments become callbacks here too, so the object holds the stand-in the recording answers from."""
    for module in _library_modules(roots):
        if is_test(module.__name__):
            continue
        for value in list(vars(module).values()):
            if not isinstance(value, type) or value.__module__ != module.__name__ or "__init__" not in value.__dict__:
                continue
            original = value.__dict__["__init__"]
            if not isinstance(original, types.FunctionType) or hasattr(original, "__propel_constructor__"):
                continue
            with contextlib.suppress(AttributeError, TypeError):
                value.__init__ = _constructor(snaps, original)


def _constructor(snaps, original):
    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        with snaps.building(self) as inner:
            if inner:  # super().__init__ of an object whose outer constructor is recording
                return original(self, *args, **kwargs)
            args = tuple(snaps.stand_in(a) for a in args)
            kwargs = {k: snaps.stand_in(v) for k, v in kwargs.items()}
            tree = snaps.call_tree(args, kwargs)
            result = original(self, *args, **kwargs)
            if tree is not None:
                snaps.constructed(self, tree)
            return result

    __init__.__propel_constructor__ = True
    return __init__


def install(targets, modules, snaps, recorder):
    """Recorders on every target function, and the data globals of ``modules`` as imported: ``(missing, state)``."""
    missing, state = [], {}
    for module in modules:
        try:
            state[module] = module_state(importlib.import_module(module), snaps)
        except Exception as e:
            missing.append([module, "", f"{type(e).__name__}: {str(e)[:100]}"])
    roots = {module.split(".")[0] for module, _ in targets}
    for module, qualname in targets:
        try:
            owner, name = owner_of(module, qualname)
            raw = attribute(owner, name)
        except Exception as e:
            missing.append([module, qualname, f"{type(e).__name__}: {str(e)[:100]}"])
            continue
        found = accessors(raw)
        if not found:
            missing.append([module, qualname, "not a function"])
            continue
        wrapped = {acc: recorder.wrap(f"{module}:{qualname}:{acc}", fn) for acc, fn in found.items()}
        new = rewrapped(raw, wrapped)
        setattr(owner, name, new)
        _sweep(roots, raw, new)
        for acc, fn in found.items():
            if acc == "call":
                _sweep(roots, fn, wrapped[acc])
    record_constructors(roots, snaps, snaps.test_module)
    return missing, state


def test_module_rule(ws, test_globs):
    """Whether a module name belongs to the suite (its file is a test path of the checkout)."""

    def is_test(name):
        module = sys.modules.get(name)
        path = getattr(module, "__file__", None)
        if not isinstance(path, str):
            return False
        rel = os.path.relpath(os.path.abspath(path), ws)
        return not rel.startswith("..") and any(fnmatch.fnmatchcase(rel, g) for g in test_globs)

    return is_test


def main():
    payload = pytest_runner.read_payload()
    pytest_runner.load_pytest()
    import pytest

    ws = os.path.abspath("ws")
    os.makedirs(ws)
    pytest_runner.write_files(ws, pytest_runner.load_files("repo"))
    os.chdir(ws)
    sys.path[:0] = [os.path.join(ws, p) for p in payload["python_path"]]
    os.environ.update(HOME=ws)
    snaps = Snapshots(test_module_rule(ws, payload["test_globs"]))
    recorder = Recorder(snaps)
    found = {}

    class Plugin:
        @staticmethod
        def pytest_configure(config):
            targets = [tuple(t) for t in payload["targets"]]
            found["missing"], found["state"] = install(targets, payload["modules"], snaps, recorder)

    args = ["-q", "-p", "no:cacheprovider", *payload["args"]]
    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
        code = pytest.main(args, plugins=[Plugin()])
    record = {"exit_code": int(code), "calls": recorder.records, "skipped": recorder.skips}
    record.update(missing=found.get("missing", []), state=found.get("state", {}), tables=snaps.tables)
    pytest_runner.write_results([record])
