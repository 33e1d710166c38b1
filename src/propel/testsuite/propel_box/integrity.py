"""The test runner's code, as it was before graded code ran: a snapshot, and what has been rebound since.

A monkeypatch is a rebinding: a module attribute, a class attribute, a builtin, a finder on ``sys.meta_path``. Python
raises no audit event for those, but the result is visible: the object bound to a name is another object. Before
any model-written code is imported, the guard snapshots every loaded module (pytest, pluggy, the standard
library, the grader's own ``propel_box``) as ``{name: object}`` for its code-like attributes (functions,
classes, modules, methods, descriptors) and for the attributes of the classes it defines, plus all of ``builtins``,
the import system's hook lists and ``sys.pycache_prefix``. ``changes(snapshot)`` lists what differs, whatever route
(an alias, ``len.__self__``, ``sys.modules``, a frame) reached it. Data attributes (counters, caches, settings) are
not compared: pytest changes its own, and rebinding data does not change what code does, with the exceptions that
are listed in ``SYS_DATA``.
"""

import functools
import sys
import types

SYS_DATA = ("pycache_prefix", "dont_write_bytecode", "excepthook", "unraisablehook", "displayhook", "breakpointhook")
"""``sys`` attributes whose value changes how the run behaves."""
SYS_LISTS = ("meta_path", "path_hooks")
OWN_FINDERS = (("_pytest.assertion.rewrite", "AssertionRewritingHook"),)
"""Import finders pytest itself puts on ``sys.meta_path`` (its assertion rewriting): the class object, looked up when
the snapshot is taken, is what is allowed, not a name a graded class could copy."""
VOLATILE = {"tempfile.tempdir", "warnings._showwarnmsg_impl", "warnings.showwarning"}
"""Attributes pytest's own plugins rebind during an honest run to objects that are not pytest's (``catch_warnings``
puts a list's ``append`` there; measured on HumanEval and the SWE repos)."""
OWNERS = ("_pytest", "pytest", "pluggy")
"""A rebinding to an object of these packages is pytest configuring itself (its ``unraisablehook``, its
``threading.excepthook``, ``legacypath`` patching ``Config``), not graded code."""
_NOT_CALLABLE_CODE = (
    types.ModuleType,
    staticmethod,
    classmethod,
    property,
    types.GetSetDescriptorType,
    types.MemberDescriptorType,
)
_MISSING = object()


def snapshot(skip=("__main__", "__mp_main__"), only=None):
    """``{key: object}`` (compared by identity; no ``id()`` calls, which the audit hook would see) for every
    code-like binding of every loaded module, of the classes they define, of builtins, and of the interpreter
    settings above. Keys hold the module or class object itself; names are only spelled out for a change.
    ``only(module)``: snapshot just the modules it accepts (the test modules, once collected)."""
    snap = {}
    plain = _NOT_CALLABLE_CODE
    for name, module in list(sys.modules.items()):
        attrs = getattr(module, "__dict__", None)
        if name in skip or not isinstance(attrs, dict) or (only is not None and not only(module)):
            continue
        snap[("module", name)] = module
        everything = name == "builtins"
        for attr, value in list(attrs.items()):
            if everything or callable(value) or isinstance(value, plain):
                snap[(module, attr)] = value
            if isinstance(value, type) and value.__dict__.get("__module__") == name:
                for cattr, cvalue in list(value.__dict__.items()):
                    if callable(cvalue) or isinstance(cvalue, plain):
                        snap[(value, cattr)] = cvalue
    if only is not None:
        return snap
    for attr in SYS_DATA:
        snap[("sys", attr)] = getattr(sys, attr, None)
    own = [getattr(sys.modules.get(m), c, None) for m, c in OWN_FINDERS]
    for attr in SYS_LISTS:
        snap[("sys", attr)] = _Items(x for x in getattr(sys, attr) if not any(type(x) is t for t in own if t))
    return snap


class _Items(tuple):
    """A hook list's entries, equal to another when the same objects are in the same order."""

    __slots__ = ()

    def __eq__(self, other):
        return (
            isinstance(other, tuple)
            and len(self) == len(other)
            and all(a is b for a, b in zip(self, other, strict=True))
        )

    __hash__ = tuple.__hash__


def _spell(key):
    owner = key[0]
    if isinstance(owner, types.ModuleType):
        owner = owner.__name__
    elif isinstance(owner, type):
        owner = f"{owner.__module__}.{owner.__qualname__}"
    return ".".join([str(owner), *map(str, key[1:])])


def _owner(value):
    """The top-level package that defines ``value`` (a function, a partial's or a bound method's function, a class,
    an instance's class), or None."""
    if isinstance(value, functools.partial):
        value = value.func
    target = getattr(value, "__func__", value)
    module = getattr(target, "__module__", None)
    if not isinstance(module, str):
        module = getattr(type(target), "__module__", None)
    return module.split(".")[0] if isinstance(module, str) else None


def changes(before, skip=("__main__", "__mp_main__"), only=None):
    """``["_pytest.reports.TestReport.__init__ rebound", ...]``: what differs from ``before`` (new modules and new
    names are not changes: importing is not tampering)."""
    after = snapshot(skip, only)
    out = []
    for key, value in before.items():
        now = after.get(key, _MISSING)
        if now is value or (isinstance(value, _Items) and value == now) or _spell(key) in VOLATILE:
            continue
        if isinstance(now, _Items):
            added = [x for x in now if not any(x is y for y in value)]
            if added and all(_owner(x) in OWNERS for x in added) and all(any(y is x for x in now) for y in value):
                continue
        elif now is not _MISSING and _owner(now) in OWNERS:
            continue
        if key[0] == "module":
            out.append(f"module {key[1]} replaced")
        else:
            out.append(f"{_spell(key)} {'rebound' if now is not _MISSING else 'deleted or rebound to data'}")
    return out
