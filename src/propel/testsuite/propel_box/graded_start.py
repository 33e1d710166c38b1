"""How every graded child (``value_child.py``, ``replay_child.py``) starts: as a user's plain ``python3 -c`` run,
confined before any model-written code runs.

Graded code must not be able to tell that it is graded (a program correct only where it is watched would be paid
while users get the bug), so the child is the interpreter a user would start, with nothing of the grader showing
where a program looks:

- the command line is ``python3 -c BOOT``: no interpreter flag, the ``site`` module and its paths, ``sys.argv`` of
  ``['-c']``, ``''`` (the workspace, which is the current folder) first on ``sys.path``;
- the environment is the sandbox job's own, as every program started in that job gets it (no ``HOME`` or
  ``TMPDIR`` of the grader's, no ``PYTHON*`` variable: a string-hash seed the runner fixes is taken out of
  ``os.environ`` before graded code runs);
- ``BOOT`` makes every graded call itself at module level, so graded code is called from a ``<string>``
  ``<module>`` frame, as in ``python3 -c 'import mod; mod.f(x)'``; the grader's own code (this package, and every
  module it imported) is taken out of ``sys.modules`` and ``sys.path``, and ``__main__`` is a plain module holding
  what a user's ``import mod`` would bind;
- requests come on stdin and answers go out on stdout, framed with a nonce among whatever graded code prints, so the
  child has exactly the three standard descriptors a user's program has; the workspace is writable (bytecode,
  scratch files), as a user's project folder is.

What cannot be hidden is listed, with its reason, in ``docs/trusted_grading.md`` (Landlock's refusals, the rules
that keep a child from starting processes, the loop's own objects on the heap). Nothing here makes the child
trusted: graded code shares its process afterwards and may rewrite any of it, so what the child sends stays data
the runner checks.
"""

import contextlib
import json
import os
import sys

from propel_box import audit, confine, no_spawn

BOOT = (
    "import sys\n"
    "g = {}\n"
    "exec(sys.stdin.readline(), g)\n"
    "while True:\n"
    "    f, a, k = g['next']()\n"
    "    try:\n"
    "        r = f(*a, **k)\n"
    "    except BaseException as e:\n"
    "        g['raised'](e)\n"
    "    else:\n"
    "        g['returned'](r)\n"
)
"""The graded child's program (``python3 -c BOOT``): it runs its first stdin line (``loader``), then makes each call
the child's ``next()`` hands it, reporting what it returned or raised. It names nothing of the grader."""


def loader(box, script, config):
    """The first stdin line: note the modules and the import path a fresh interpreter holds, import
    ``propel_box.<script>`` from ``box`` with nothing of the workspace on the path (a file there named like a
    standard-library module is not the grader's), and ``start`` it with ``config`` (JSON text)."""
    return (
        "import os, sys; b = set(sys.modules); p = list(sys.path); "
        f"sys.path[:] = [{box!r}] + [x for x in p if x and not (x + '/').startswith(os.getcwd() + '/')]; "
        f"from propel_box.{script} import start; start(globals(), b, p, {json.dumps(config)!r})\n"
    )


class PlainMain:
    """``__main__`` as a user's ``python3 -c 'import mod'`` leaves it: the interpreter's own entries and ``mod``."""

    def __init__(self):
        real = sys.modules["__main__"]
        self.module = type(sys)("__main__")
        for name in ("__doc__", "__package__", "__loader__", "__spec__", "__annotations__", "__builtins__"):
            if name in vars(real):
                setattr(self.module, name, vars(real)[name])

    def install(self):
        sys.modules["__main__"] = self.module

    def bind(self, module_name):
        """What ``import module_name`` binds in the user's ``__main__`` (its top-level package)."""
        top = module_name.split(".")[0]
        if top in sys.modules:
            setattr(self.module, top, sys.modules[top])


class GradedCalls:
    """What ``BOOT`` calls and where its results go (``next``, ``returned``, ``raised``): the value and replay
    children's shared half; each defines ``_steps``, the generator of ``(function, args, kwargs)`` it answers."""

    def __init__(self, send, main):
        self.send, self.main = send, main
        self.readline, self.loads = sys.stdin.readline, json.loads
        self.steps = self._steps()
        self.result = self.error = None

    def _steps(self):
        raise NotImplementedError

    def next(self):
        return next(self.steps)

    def returned(self, value):
        self.result, self.error = value, None

    def raised(self, error):
        self.result, self.error = None, error


def _grader_path(entry, box, ws):
    """Whether a ``sys.path`` entry is the grader's: its folder or one in it, other than the workspace (which a
    runner may make inside its own folder: a source layout's ``PYTHONPATH`` entry, ``ws/src``, is the user's)."""
    return _inside(entry, box) and not _inside(entry, ws)


def _inside(entry, root):
    return entry == root or entry.startswith(root.rstrip("/") + "/")


def start_graded(config, baseline, path):
    """Confine this child and make it plain (see the module docstring): ``(send, graded_dir, main)``, where
    ``send(record)`` writes one framed record to stdout and ``main`` is the plain ``__main__``. ``config`` has
    ``box``, ``ws``, ``tmp``, ``nonce`` (and ``threads``: threads allowed, no new process); ``baseline`` is the set
    of modules the interpreter held before the loader imported anything, ``path`` its ``sys.path``. Call it after
    every import the child needs: the modules imported since ``baseline`` leave ``sys.modules`` here, and
    ``sys.path`` is ``path`` again."""
    box, ws, tmp = config["box"], config["ws"], config["tmp"]
    write, dumps, frame = os.write, json.dumps, ("\n" + config["nonce"]).encode()

    def send(record):
        with contextlib.suppress(OSError, TypeError, ValueError):
            data = frame + dumps(record).encode() + b"\n"
            while data:
                data = data[write(1, data) :]

    runtime = confine.runtime_paths()
    own = [p for p in ("/proc/self", "/proc/thread-self") if os.path.exists(p)]
    abi = confine.restrict(read=runtime + [ws] + own, write=[ws, tmp], read_write_files=[os.devnull], list_only=["/"])
    if config.get("threads"):  # no new process, threads allowed (a replay child keeps its job's process limit)
        no_spawn.apply()
    send({"start": abi})

    def emit(flag, event, where, detail):
        send({"audit": [flag, event, where, detail]})

    graded_dir = ws.rstrip("/") + "/"
    audit.install(
        emit, lambda f: f.startswith(graded_dir), writable=[ws, tmp], readable=runtime + [ws] + own, graded_root=ws
    )
    os.environ.pop("PYTHONHASHSEED", None)  # the runner's fixed seed (a replay's), not a user's variable
    sys.path[:] = [p for p in path if not _grader_path(p, box, ws)]
    main = PlainMain()
    kept = [sys.modules.pop(name) for name in list(sys.modules) if name not in baseline]
    for module in kept:  # a heap walk finds the loop's classes: they name no module of the grader's
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__module__ == module.__name__ and module.__name__.startswith("propel"):
                with contextlib.suppress(AttributeError, TypeError):
                    value.__module__ = "__main__"
    main.install()
    send.kept = kept  # the grader's modules stay alive (their functions are in use) out of sys.modules
    return send, graded_dir, main
