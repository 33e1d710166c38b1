"""The job's side of the in-sandbox worker: the forked child that runs one job, and how its end is classified.

Standard library only: ``local.worker_source`` inlines this text into the worker (``python3 -S -I -c``).
"""

import atexit
import contextlib
import ctypes
import math
import os
import resource
import signal
import sys
import traceback  # imported once in the worker rather than in every child (it costs ~8 ms)
import types

_MEMORY_LINE = b"\nMemoryError\n"  # allocated up front: written when even a traceback no longer fits in memory
_MEMORY_MARKERS = (b"MemoryError", b"Cannot allocate memory", b"std::bad_alloc", b"out of memory")


def _die_with_parent():
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def apply_limits(lim, nproc_limit):
    """The job's rlimits; ``nproc_limit`` None leaves RLIMIT_NPROC alone (a uid shared with other processes)."""
    cpu = int(math.ceil(lim["cpu_s"]))
    mem = int(lim["memory_mb"]) * 1024 * 1024
    fsize = int(lim["max_file_mb"]) * 1024 * 1024
    todo = [
        (resource.RLIMIT_CPU, (cpu, cpu + 1)),
        (resource.RLIMIT_AS, (mem, mem)),
        (resource.RLIMIT_FSIZE, (fsize, fsize)),
        (resource.RLIMIT_NOFILE, (int(lim["max_open_files"]),) * 2),
        (resource.RLIMIT_CORE, (0, 0)),
    ]
    if nproc_limit is not None:
        todo.append((resource.RLIMIT_NPROC, (nproc_limit, nproc_limit)))
    for which, value in todo:
        resource.setrlimit(which, value)


def print_exception(e, tb):
    """Print a traceback like the interpreter; if that fails too (a MemoryError under the address-space limit), at
    least the exception's type, so the outcome is still classified (``memory`` for a MemoryError)."""
    try:
        traceback.print_exception(type(e), e, tb)
    except BaseException:
        with contextlib.suppress(BaseException):
            os.write(2, _MEMORY_LINE if isinstance(e, MemoryError) else f"\n{type(e).__name__}\n".encode())


def run_source():
    """Run ./main.py in this (forked) interpreter the way ``python3 main.py`` would, and return its exit code."""
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
    sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", closefd=False, buffering=1)  # noqa: SIM115
    sys.path[0:0] = [os.getcwd()]
    module = types.ModuleType("__main__")
    module.__dict__.update(__file__="main.py", __builtins__=__builtins__)
    sys.modules["__main__"] = module
    code = 0
    try:
        with open("main.py", "rb") as f:
            compiled = compile(f.read(), "main.py", "exec")
        exec(compiled, module.__dict__)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code & 0xFF
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except SyntaxError as e:
        print_exception(e, None)
        code = 1
    except BaseException as e:  # report it like the interpreter would
        print_exception(e, e.__traceback__.tb_next if e.__traceback__ is not None else None)
        code = 1
    try:
        if "threading" in sys.modules:
            sys.modules["threading"]._shutdown()
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        code = code or 120
    return code


def run_child(job, workdir, stdin_path, out_w, err_w, nproc_limit):
    """The forked child: its own session, streams, cwd and limits, then the job (an exec'd argv or ./main.py).

    Never returns."""
    try:
        os.setsid()
        _die_with_parent()
        fd = os.open(stdin_path, os.O_RDONLY)
        os.dup2(fd, 0)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        os.closerange(3, 65536)
        os.chdir(workdir)
        os.environ.update(HOME=workdir, TMPDIR=workdir, PWD=workdir)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGXCPU, signal.SIGINT):
            signal.signal(sig, signal.SIG_DFL)
        apply_limits(job["limits"], nproc_limit)
        if job.get("argv"):
            argv = job["argv"]
            try:
                os.execvp(argv[0], argv)
            except (OSError, ValueError) as e:  # ValueError: a NUL or an unencodable character in the argv
                os.write(2, f"cannot run {argv[0]!r}: {e}\n".encode())
                os._exit(127)
        sys.argv = ["main.py", *job.get("args", [])]
        signal.signal(signal.SIGINT, signal.default_int_handler)
    except BaseException as e:
        try:
            os.write(2, f"sandbox child setup failed: {e!r}\n".encode())
        finally:
            os._exit(121)
    code = 120
    try:
        code = run_source()
    finally:
        os._exit(code)


def classify(timed_out, over_output, status, cpu, lim, err, oom):
    """The outcome and exit code of a finished job, from how it ended and what it wrote last."""
    if timed_out:
        return "timeout", None
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if over_output or sig == signal.SIGXFSZ:
            return "output_limit", -sig
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= math.ceil(lim["cpu_s"]) - 0.05):
            return "timeout", -sig
        if oom:
            return "memory", -sig
        return "killed", -sig
    code = os.WEXITSTATUS(status)
    if over_output:
        return "output_limit", code
    if code == 0:
        return "ok", 0
    tail = err[-4096:]
    if oom or any(m in tail for m in _MEMORY_MARKERS):
        return "memory", code
    return "error", code
