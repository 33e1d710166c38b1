"""A fingerprint probe: graded code that records everything it can observe about the process it runs in.

This module is shipped as the graded code itself (standard library only; its text is the submission): a HumanEval
answer whose ``probe(x)`` returns ``observe()``, a library whose ``Probe(...).look(x)`` is replayed by the SWE
grader, an agent's module graded by value. Run the same way as a user would run it (``python3 -c 'import mod; ...'``
or ``python3 file.py``), it gives the user's fingerprint; ``propel.testing.fingerprint`` diffs the two. Whatever
differs is something graded code could branch on to be correct only where it is watched.

Every value is plain data (str, int, bool, None, lists, dicts with str keys); paths under the working folder are
written ``<cwd>/...`` so that two runs in different folders compare. ``sys.modules`` is read first, before this
function imports anything of its own.
"""

import os
import sys

SEED_ZERO_HASH = -5141352613434444793
"""``hash("propel-fingerprint")`` under ``PYTHONHASHSEED=0`` on CPython 3.11 (a fixed, well-known seed is a tell)."""

_EVENTS = {}
"""id(instance) -> how it came to be, in order: ``new``, ``init``, ``copy``, ``deepcopy``, ``setstate``."""


def _norm(value, cwd):
    if isinstance(value, str):
        return value.replace(cwd, "<cwd>") if cwd and cwd != "/" else value
    if isinstance(value, (list, tuple)):
        return [_norm(v, cwd) for v in value]
    if isinstance(value, dict):
        return {str(k): _norm(v, cwd) for k, v in value.items()}
    return value


def _safe(fn, default="<error>"):
    try:
        return fn()
    except Exception as e:  # an observable that cannot be read is itself an observation
        return f"{default}:{type(e).__name__}"


def _flags():
    return {
        name: getattr(sys.flags, name)
        for name in dir(sys.flags)
        if not name.startswith(("_", "n_")) and isinstance(getattr(sys.flags, name), (int, bool))
    }


def _frames():
    """``[file, function]`` of every frame from ``observe``'s caller up (the graded function and its callers)."""
    out, frame = [], sys._getframe(2)
    while frame is not None and len(out) < 40:
        name = frame.f_code.co_filename
        out.append([name if name.startswith("<") else os.path.basename(name), frame.f_code.co_name])
        frame = frame.f_back
    return out


def _fds():
    found = []
    for fd in range(0, 256):
        try:
            os.fstat(fd)
        except OSError:
            continue
        found.append(fd)
    return found


def _kind(fd):
    import stat

    try:
        mode = os.fstat(fd).st_mode
    except OSError as e:
        return f"closed:{type(e).__name__}"
    kinds = [("fifo", stat.S_ISFIFO), ("chr", stat.S_ISCHR), ("reg", stat.S_ISREG), ("sock", stat.S_ISSOCK)]
    return next((name for name, test in kinds if test(mode)), "other") + (":tty" if os.isatty(fd) else "")


def _pending(fd):
    import array
    import fcntl
    import termios

    buf = array.array("i", [0])
    fcntl.ioctl(fd, termios.FIONREAD, buf, True)
    return buf[0]


def _listing(path):
    try:
        return sorted(os.listdir(path))[:60]
    except OSError as e:
        return f"denied:{type(e).__name__}"


def _parents(cwd):
    out, path = [], cwd
    while path != "/":
        path = os.path.dirname(path)
        out.append(_listing(path))
    return out


def _writable(folder):
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=folder):
            return True
    except OSError as e:
        return f"no:{type(e).__name__}"


def _readable(path):
    try:
        with open(path, "rb") as f:
            return len(f.read(1 << 16)) > 0
    except OSError as e:
        return f"no:{type(e).__name__}"


def _status_field(name):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].strip()
    return None


def _no_new_privs():
    import ctypes

    return ctypes.CDLL(None).prctl(39, 0, 0, 0, 0)  # PR_GET_NO_NEW_PRIVS


def _rlimits():
    import resource

    out = {}
    for name in sorted(n for n in dir(resource) if n.startswith("RLIMIT_")):
        out[name] = list(resource.getrlimit(getattr(resource, name)))
    return out


def _signals():
    import signal

    out = {}
    for sig in sorted(signal.valid_signals()):
        handler = signal.getsignal(sig)
        if handler in (signal.SIG_DFL, signal.SIG_IGN, None):
            text = {signal.SIG_DFL: "dfl", signal.SIG_IGN: "ign", None: "none"}[handler]
        else:
            text = getattr(handler, "__qualname__", type(handler).__name__)
        out[str(int(sig))] = text
    return out


def _audit_hook_seen():
    """Whether some audit hook looked at an event's arguments (a hook that calls back into them reveals itself)."""
    seen = []

    class Path:
        def __fspath__(self):
            seen.append("fspath")
            return "/nonexistent-propel"

    class Name(str):
        def __hash__(self):
            seen.append("hash")
            return str.__hash__(self)

        def __eq__(self, other):
            seen.append("eq")
            return str.__eq__(self, other)

        def __str__(self):
            seen.append("str")
            return str.__str__(self)

    sys.audit("open", Path(), "r", 0)
    sys.audit("object.__getattr__", object(), Name("f_back"))
    sys.audit("import", Name("pytest"), None, [], [], [])
    return sorted(set(seen))


def _gc_types():
    """Types of live objects defined outside the standard library and this probe (someone else's code here)."""
    import gc

    stdlib = set(sys.stdlib_module_names) | {"builtins", "__main__", __name__}
    found = set()
    for obj in gc.get_objects():
        kind = obj if isinstance(obj, type) else type(obj)
        module = getattr(kind, "__module__", None) or ""
        if isinstance(module, str) and module.split(".")[0] not in stdlib:
            found.add(f"{module}.{getattr(kind, '__qualname__', '?')}")
    return sorted(found)[:80]


def _callable(fn):
    """What a callable given to graded code looks like from the outside."""
    if fn is None:
        return None
    import inspect

    code = getattr(fn, "__code__", None)
    return {
        "type": type(fn).__name__,
        "name": getattr(fn, "__name__", None),
        "qualname": getattr(fn, "__qualname__", None),
        "module": getattr(fn, "__module__", None),
        "attrs": sorted(getattr(fn, "__dict__", {}) or {}),
        "file": None if code is None else os.path.basename(code.co_filename),
        "signature": _safe(lambda: str(inspect.signature(fn))),
        "wrapped": hasattr(fn, "__wrapped__"),
        "closure": 0 if getattr(fn, "__closure__", None) is None else len(fn.__closure__),
        "module_loaded": getattr(fn, "__module__", None) in sys.modules,
    }


def observe(instance=None, callback=None, only=None):
    """Every observable of this process (see the module docstring), or the one named ``only``; ``instance``: a
    ``Probe`` whose making is reported; ``callback``: a callable the caller passed in. ``sys.modules`` and the call
    stack are read first (the stack only when asked for)."""
    modules = sorted(sys.modules)
    frames = _frames() if only in (None, "frames", "depth") else None  # reading frames is itself an audited event
    cwd = os.getcwd()
    main = sys.modules.get("__main__")
    home = os.environ.get("HOME", "")
    thunks = {
        "modules": lambda: modules,
        "flags": lambda: _flags(),
        "argv": lambda: sys.argv,
        "orig_argv_len": lambda: len(getattr(sys, "orig_argv", [])),
        "orig_argv_flags": lambda: [a for a in getattr(sys, "orig_argv", [])[1:] if a.startswith("-")],
        "executable": lambda: sys.executable,
        "prefix": lambda: [sys.prefix, sys.base_prefix],
        "path": lambda: sys.path,
        "meta_path": lambda: [type(f).__name__ if not isinstance(f, type) else f.__name__ for f in sys.meta_path],
        "path_hooks": lambda: [getattr(h, "__qualname__", type(h).__name__) for h in sys.path_hooks],
        "environ": lambda: dict(os.environ),
        "home_is_tmpdir": lambda: home != "" and home == os.environ.get("TMPDIR"),
        "home_under_cwd": lambda: home.startswith(cwd),
        "cwd_entries": lambda: sorted(n for n in os.listdir(cwd) if n != "__pycache__"),
        "cwd_depth": lambda: cwd.count("/"),
        "parents": lambda: _parents(cwd),
        "root": lambda: _listing("/"),
        "main": lambda: sorted(vars(main)) if main is not None else None,
        "main_file": lambda: getattr(main, "__file__", None) if main is not None else None,
        "main_loader": lambda: type(getattr(main, "__loader__", None)).__name__,
        "main_builtins": lambda: type(getattr(main, "__builtins__", None)).__name__,
        "builtins_type": lambda: type(globals().get("__builtins__")).__name__,
        "builtins": lambda: sorted(dir(__import__("builtins"))),
        "frames": lambda: frames,
        "depth": lambda: len(frames),
        "recursion_limit": lambda: sys.getrecursionlimit(),
        "switch_interval": lambda: sys.getswitchinterval(),
        "int_max_str_digits": lambda: sys.get_int_max_str_digits(),
        "dont_write_bytecode": lambda: sys.dont_write_bytecode,
        "pycache_prefix": lambda: sys.pycache_prefix,
        "trace": lambda: [sys.gettrace() is None, sys.getprofile() is None],
        "hooks": lambda: [
            sys.excepthook is sys.__excepthook__,
            sys.displayhook is sys.__displayhook__,
            sys.breakpointhook is sys.__breakpointhook__,
            sys.unraisablehook is sys.__unraisablehook__,
        ],
        "hash_randomization": lambda: sys.flags.hash_randomization,
        "hash_seed_zero": lambda: hash("propel-fingerprint") == SEED_ZERO_HASH,
        "encodings": lambda: [
            sys.getfilesystemencoding(),
            sys.getdefaultencoding(),
            _safe(lambda: sys.stdout.encoding),
        ],
        "stdio": lambda: {str(fd): _kind(fd) for fd in (0, 1, 2)},
        "stdio_objects": lambda: [_safe(lambda s=s: type(s).__name__) for s in (sys.stdin, sys.stdout, sys.stderr)],
        "stdio_buffering": lambda: [_safe(lambda s=s: s.line_buffering) for s in (sys.stdin, sys.stdout, sys.stderr)],
        "stdin_pending": lambda: _safe(lambda: _pending(0)),
        "fds": lambda: _fds(),
        "umask": lambda: (lambda m: (os.umask(m), m)[1])(os.umask(0o022)),
        "ids": lambda: [os.getuid(), os.geteuid(), os.getgid(), os.getegid(), sorted(os.getgroups())],
        "pid_is_1": lambda: os.getpid() == 1,
        "ppid_is_1": lambda: os.getppid() == 1,
        "sid_is_pid": lambda: _safe(lambda: os.getsid(0) == os.getpid()),
        "pgid_is_pid": lambda: os.getpgid(0) == os.getpid(),
        "affinity": lambda: _safe(lambda: len(os.sched_getaffinity(0))),
        "nice": lambda: os.nice(0),
        "rlimits": lambda: _rlimits(),
        "signals": lambda: _signals(),
        "faulthandler": lambda: _safe(lambda: __import__("faulthandler").is_enabled()),
        "warnings": lambda: _safe(
            lambda: [
                [f[0], str(f[1]), getattr(f[2], "__name__", "?"), str(f[3]), f[4]]
                for f in __import__("warnings").filters
            ]
        ),
        "locale": lambda: _safe(
            lambda: [str(__import__("locale").getlocale()), __import__("locale").getpreferredencoding(False)]
        ),
        "tempdir": lambda: _safe(lambda: __import__("tempfile").gettempdir()),
        "write_cwd": lambda: _writable(cwd),
        "write_tmp": lambda: _writable("/tmp"),
        "write_home": lambda: _writable(home) if home else None,
        "read_proc_status": lambda: _readable("/proc/self/status"),
        "read_proc_1": lambda: _readable("/proc/1/cmdline"),
        "read_etc_passwd": lambda: _readable("/etc/passwd"),
        "no_new_privs": lambda: _safe(_no_new_privs),
        "seccomp": lambda: _safe(lambda: _status_field("Seccomp")),
        "audit_hook_seen": lambda: _audit_hook_seen(),
        "gc_types": lambda: _gc_types(),
        "cached_exists": lambda: _safe(lambda: os.path.exists(sys.modules[__name__].__cached__)),
        "module_file": lambda: _safe(lambda: sys.modules[__name__].__file__),
        "making": lambda: None if instance is None else list(_EVENTS.get(id(instance), [])),
        "instance": lambda: (
            None
            if instance is None
            else {
                "type": type(instance).__qualname__,
                "dict": sorted(getattr(instance, "__dict__", {})),
                "inited": getattr(instance, "inited", "missing"),
            }
        ),
        "callback": lambda: _callable(callback),
    }
    out = {key: thunk() for key, thunk in thunks.items() if only in (None, key)}
    if only in (None, "threads"):
        import threading

        out["threads"] = sorted(t.name for t in threading.enumerate())
    return _norm(out, cwd)


def probe(x=None):
    """A value-graded entry point: the observations (``x`` is ignored)."""
    return observe()


class Probe:
    """A library object the SWE grader replays calls on: it reports how it was made and what it was given."""

    def __new__(cls, *args, **kwargs):
        made = super().__new__(cls)
        _EVENTS[id(made)] = ["new"]
        return made

    def __init__(self, tag, convert=None):
        _EVENTS.setdefault(id(self), []).append("init")
        self.tag, self.convert, self.inited = tag, convert, True

    def __copy__(self):
        _EVENTS.setdefault(id(self), []).append("copy")
        clone = Probe.__new__(Probe)
        clone.__dict__.update(self.__dict__)
        return clone

    def __deepcopy__(self, memo):
        _EVENTS.setdefault(id(self), []).append("deepcopy")
        return self.__copy__()

    def __setstate__(self, state):
        _EVENTS.setdefault(id(self), []).append("setstate")
        self.__dict__.update(state)

    def look(self, x):
        """The observations, with how ``self`` was made and what its converter looks like."""
        if self.convert is not None:
            self.convert(x)
        return observe(self, self.convert)
