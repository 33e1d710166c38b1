"""Where a target function lives: ``module:qualname:accessor`` resolved the same way by the recorder (on the clean
library) and by the graded replay child (on the repaired one), and a module's data globals as snapshots."""

import contextlib
import importlib
import types

from propel_box.snapshot import NoSnapshot


def accessors(raw):
    """``{accessor: function}`` of a class or module attribute: a plain callable as ``call``, a static or class
    method's function, a property's ``fget``/``fset``/``fdel``."""
    if isinstance(raw, (staticmethod, classmethod)):
        return {"call": raw.__func__}
    if isinstance(raw, property):
        return {name: getattr(raw, name) for name in ("fget", "fset", "fdel") if getattr(raw, name) is not None}
    return {"call": raw} if callable(raw) else {}


def rewrapped(raw, wrapped):
    """``raw`` with its accessors replaced by ``wrapped[accessor]`` (the same kind of attribute)."""
    if isinstance(raw, staticmethod):
        return staticmethod(wrapped["call"])
    if isinstance(raw, classmethod):
        return classmethod(wrapped["call"])
    if isinstance(raw, property):
        return property(wrapped.get("fget"), wrapped.get("fset"), wrapped.get("fdel"), raw.__doc__)
    return wrapped["call"]


def owner_of(module, qualname):
    """``(owner, name)``: the module or class holding the target's attribute."""
    parts = qualname.split(".")
    owner = importlib.import_module(module)
    for part in parts[:-1]:
        owner = getattr(owner, part)
    return owner, parts[-1]


def attribute(owner, name):
    """The raw attribute (a class's ``__dict__`` entry keeps staticmethod/classmethod/property wrappers)."""
    if isinstance(owner, type):
        for klass in owner.__mro__:
            if name in klass.__dict__:
                return klass.__dict__[name]
        raise AttributeError(name)
    return getattr(owner, name)


def module_state(module, snaps):
    """``{name: snapshot}`` of a module's data globals as a caller sees them (``Snapshots.observe``; not functions,
    classes or modules; only what has a snapshot)."""
    out = {}
    for name, value in list(vars(module).items()):
        if name.startswith("__") or isinstance(value, (types.ModuleType, type)) or callable(value):
            continue
        with contextlib.suppress(NoSnapshot, RecursionError):
            out[name] = snaps.observe(value)
    return out
