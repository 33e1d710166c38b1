"""The in-sandbox worker: started once (inside bubblewrap or a container), it forks one fresh child per job.

Runs as ``python3 -S -I -c <this file's text> <config json>``, so it imports only the standard library and nothing
from ``propel``. Forking a warm interpreter skips the ~10 ms interpreter start per job; each child still gets its own
session, rlimits, work dir and streams, and everything it leaves behind is killed and deleted before the next job.
With the ``workspace`` config option (a ``Session``), that directory is every job's cwd and is kept between jobs;
processes are still killed after each job.

Protocol (fd 0 in, fd 1 out; fd 2 is the worker's own log): every frame is a 4-byte big-endian length and a JSON
header, followed by the raw blobs the header announces. Parent -> worker: one job frame (files, then stdin). Worker
-> parent: a ``started`` frame with the child's pid, then a ``done`` frame followed by the stdout and stderr bytes;
both echo the job's ``id``.

After each job everything writable is emptied (the job roots under ``base`` and every ``scratch`` folder, POSIX and
System V IPC objects), so the next job finds nothing of this one. Under bubblewrap the worker is PID 1 of its PID
namespace, so a job cannot signal it (the kernel drops SIGKILL/SIGSTOP sent to init from inside), and it reaps the
orphans itself.
"""

import atexit
import contextlib
import ctypes
import json
import math
import os
import resource
import select
import shutil
import signal
import struct
import sys
import tempfile
import time
import traceback  # imported once here rather than in every child (it costs ~8 ms)
import types

_LEN = struct.Struct(">I")
_MEMORY_LINE = b"\nMemoryError\n"  # allocated up front: written when even a traceback no longer fits in memory
_MEMORY_MARKERS = (b"MemoryError", b"Cannot allocate memory", b"std::bad_alloc", b"out of memory")
_CONFIG = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
# kill_all: kill(-1) after each job; only safe where this worker is alone with its uid in a pid namespace.
_KILL_ALL = bool(_CONFIG.get("kill_all", False))
_BASE = _CONFIG.get("base", "/tmp")
_NPROC_BASE = int(_CONFIG.get("nproc_base", 0))  # processes of this uid alive before the job (None: no RLIMIT_NPROC)
_USE_NPROC = bool(_CONFIG.get("nproc", True))
_LIBC = ctypes.CDLL(None, use_errno=True)
# workspace: a session's persistent cwd (files land there, never wiped); job roots under _BASE then hold stdin only.
_WORKSPACE = _CONFIG.get("workspace")
# workspace_bytes: the workspace's size cap (a host folder has no tmpfs size): measured while a command runs (every 10
# to 100 ms) and when it ends; a command that grows the workspace past it is killed and reported as output_limit.
_WORKSPACE_CAP = _CONFIG.get("workspace_bytes") if _WORKSPACE else None


def _kept_child(folder):
    """The entry of ``folder`` that leads to a session's workspace (kept when the folder is emptied), if any."""
    prefix = folder.rstrip("/") + "/"
    if _WORKSPACE and _WORKSPACE.startswith(prefix):
        return _WORKSPACE[len(prefix) :].split("/")[0]
    return None


# Emptied after every job: the job roots' base and the scratch folders (all but the way to a session's workspace).
_SCRATCH = [(p, _kept_child(p)) for p in dict.fromkeys([_BASE, *_CONFIG.get("scratch", ["/tmp", "/dev/shm"])])]
# subreaper: without a PID namespace, orphans of a job come back to this worker, which kills all its descendants.
_SUBREAPER = bool(_CONFIG.get("subreaper", False))
# Memory cgroup OOM-kill counters (Docker: the container's cgroup, v2 or v1); an increase during a job means memory.
_OOM_FILES = (("/sys/fs/cgroup/memory.events", "oom_kill"), ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"))


def _read_exact(fd, n):
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _send(header, *blobs):
    raw = json.dumps(header).encode()
    _write_all(1, _LEN.pack(len(raw)) + raw + b"".join(blobs))


def _free_bytes():
    try:
        st = os.statvfs(_WORKSPACE or _BASE)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def _recv():
    """The next job frame and its blobs; blobs that cannot fit in the free scratch space are read and dropped (held
    in memory they could push the worker past a container's memory limit) and the header notes it as ``too_big``."""
    head = _read_exact(0, _LEN.size)
    if head is None:
        return None, []
    header = json.loads(_read_exact(0, _LEN.unpack(head)[0]))
    sizes = header.get("sizes", [])
    free = _free_bytes()
    if free is not None and sum(sizes) > free:
        for n in sizes:
            while n > 0:
                got = len(os.read(0, min(n, 1 << 20)))
                if not got:
                    return None, []
                n -= got
        header["too_big"] = (sum(sizes), free)
        return header, []
    blobs = [_read_exact(0, n) for n in sizes]
    return header, blobs


def _set_no_dump():
    """PR_SET_DUMPABLE=0: a job running as the same uid cannot ptrace this worker or write into its /proc fds."""
    with contextlib.suppress(Exception):
        _LIBC.prctl(4, 0, 0, 0, 0)


def _oom_kills():
    for path, key in _OOM_FILES:
        try:
            with open(path) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def _remove_ipc():
    """Remove the System V shared memory segments, message queues and semaphores left in this IPC namespace."""
    for kind, ctl in (("shm", "shmctl"), ("msg", "msgctl"), ("sem", "semctl")):
        try:
            with open(f"/proc/sysvipc/{kind}") as f:
                ids = [int(line.split()[1]) for line in f.readlines()[1:] if line.strip()]
        except (OSError, ValueError, IndexError):
            continue
        for ipc_id in ids:
            getattr(_LIBC, ctl)(ipc_id, *((0,) if kind == "sem" else ()), 0, None)  # IPC_RMID == 0


def _reap_orphans():
    """As PID 1 or a subreaper, collect exited orphans (zombies count against the next job's process limit)."""
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return


def _descendants():
    me, parents = os.getpid(), {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    parents[int(entry)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, todo = set(), [me]
    while todo:
        pid = todo.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found.add(child)
                todo.append(child)
    return found


def _has_children():
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _kill_descendants(rounds=50):
    """SIGKILL every descendant (orphans came back to us as subreaper), again until none is left. As a subreaper,
    a descendant that outlived the job has an ancestor that is our child: with no child, there is nothing to do."""
    if not _has_children():
        return
    for _ in range(rounds):
        pids = _descendants()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.002)
        _reap_orphans()


def _die_with_parent():
    with contextlib.suppress(Exception):
        _LIBC.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG


def _workspace_bytes(path):
    """Disk space the workspace holds (allocated blocks, hard links once, symlinks not followed). A folder a command
    made unreadable is made readable again (it belongs to the job's uid, as it does to us) rather than skipped."""
    total, seen, todo = 0, set(), [path]
    while todo:
        folder = todo.pop()
        try:
            entries = list(os.scandir(folder))
        except PermissionError:
            try:
                os.chmod(folder, 0o700)
                entries = list(os.scandir(folder))
            except OSError:
                continue
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) in seen:
                continue
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
            if entry.is_dir(follow_symlinks=False):
                todo.append(entry.path)
    return total


def _apply_limits(lim):
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
    if _USE_NPROC:
        nproc = _NPROC_BASE + int(lim["max_processes"])
        todo.append((resource.RLIMIT_NPROC, (nproc, nproc)))
    for which, value in todo:
        resource.setrlimit(which, value)


def _print_exception(e, tb):
    """Print a traceback like the interpreter; if that fails too (a MemoryError under the address-space limit), at
    least the exception's type, so the outcome is still classified (``memory`` for a MemoryError)."""
    try:
        traceback.print_exception(type(e), e, tb)
    except BaseException:
        with contextlib.suppress(BaseException):
            os.write(2, _MEMORY_LINE if isinstance(e, MemoryError) else f"\n{type(e).__name__}\n".encode())


def _run_source():
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
        _print_exception(e, None)
        code = 1
    except BaseException as e:  # report it like the interpreter would
        _print_exception(e, e.__traceback__.tb_next if e.__traceback__ is not None else None)
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


def _child(job, workdir, stdin_path, out_w, err_w):
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
        _apply_limits(job["limits"])
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
        code = _run_source()
    finally:
        os._exit(code)


def _kill_leftovers(pid):
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if _KILL_ALL:
        with contextlib.suppress(OSError):
            os.kill(-1, signal.SIGKILL)  # everything of this uid in this pid namespace except us and init


def _wait_reaped(limit_s=2.0):
    """Wait until init has reaped what we killed (our own child must be reaped already): zombies still count
    against the process limit of the next job. As PID 1, reap them ourselves."""
    me, until = os.getpid(), time.monotonic() + limit_s
    while time.monotonic() < until:
        if me == 1:
            _reap_orphans()
        others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
        if not others:
            return
        time.sleep(0.002)


def _wipe(path, keep_root, keep=None):
    def fix(func, p, _exc):
        try:
            os.chmod(os.path.dirname(p), 0o700)
            os.chmod(p, 0o700)
            func(p)
        except OSError:
            pass

    if not os.path.isdir(path):
        return
    if not keep_root:
        shutil.rmtree(path, onerror=fix)
        return
    for name in os.listdir(path):
        if name == keep:
            continue
        p = os.path.join(path, name)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, onerror=fix)
        else:
            with contextlib.suppress(OSError):
                os.unlink(p)


def _put_files(workdir, names, blobs):
    """Write a session's files into its workspace, replacing what is there. Earlier commands may have left a read-only
    file, a symlink or a directory in the way: unlink first, and report what still fails instead of dying with it."""
    with contextlib.suppress(OSError):
        os.makedirs(workdir, exist_ok=True)  # a command may have emptied or locked its own workspace
        os.chmod(workdir, 0o700)
    for name, data in zip(names, blobs, strict=False):
        path = os.path.join(workdir, name)
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            with open(path, "wb") as f:
                f.write(data)
        except OSError as e:
            return f"sandbox cannot write {name!r} into the workspace: {e}\n".encode()
    return None


def _classify(timed_out, over_output, status, cpu, lim, err, oom):
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


def _write_inputs(root, workdir, names, blobs):
    """Write the job's files and stdin; returns an error message instead of raising (a full disk, a bad name)."""
    try:
        if _WORKSPACE is None:
            os.mkdir(workdir)
            for name, data in zip(names, blobs, strict=False):
                path = os.path.join(workdir, name)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                with open(path, "wb") as f:
                    f.write(data)
        else:
            problem = _put_files(workdir, names, blobs)
            if problem is not None:
                return problem
        with open(os.path.join(root, "stdin"), "wb") as f:
            f.write(blobs[len(names)] if len(blobs) > len(names) else b"")
    except (OSError, ValueError) as e:
        return f"sandbox cannot write the job's files and stdin (inputs larger than its scratch space?): {e}\n".encode()
    return None


def _clean_up():
    """Leave nothing writable behind for the next job: files, IPC objects, orphans."""
    if _SUBREAPER:
        _kill_descendants()
    for path, keep in _SCRATCH:
        _wipe(path, keep_root=True, keep=keep)
    _remove_ipc()


def _run_job(job, blobs):
    lim = job["limits"]
    cap = int(lim["max_output_bytes"])
    job_id = job.get("id")
    try:
        root = tempfile.mkdtemp(prefix="job-", dir=_BASE)
    except OSError:
        _clean_up()  # a full base (a bug or a leftover): make room once
        root = tempfile.mkdtemp(prefix="job-", dir=_BASE)
    names = job.get("files", [])
    workdir = os.path.join(root, "work") if _WORKSPACE is None else _WORKSPACE
    held = _workspace_bytes(_WORKSPACE) if _WORKSPACE_CAP else None  # before this job's files: they count too
    if job.get("too_big"):
        total, free = job["too_big"]
        problem = f"sandbox cannot write the job's files and stdin: {total} bytes, {free} bytes free\n".encode()
    else:
        problem = _write_inputs(root, workdir, names, blobs)
    if problem is not None:  # the job does not run: an error result, and the worker lives on
        _wipe(root, keep_root=False)
        _clean_up()
        _send({"event": "started", "id": job_id, "pid": None})
        err = problem[:cap]
        header = {"event": "done", "id": job_id, "outcome": "error", "exit_code": None, "wall_s": 0.0, "cpu_s": 0.0}
        header.update(out_n=0, err_n=len(err), truncated=False)
        _send(header, b"", err)
        return
    stdin_path = os.path.join(root, "stdin")
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    oom_before = _oom_kills()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:
        _child(job, workdir, stdin_path, out_w, err_w)
    os.close(out_w)
    os.close(err_w)
    _send({"event": "started", "id": job_id, "pid": pid})
    pidfd = os.pidfd_open(pid)
    bufs = {out_r: bytearray(), err_r: bytearray()}
    open_fds = {out_r, err_r}
    deadline = start + float(lim["timeout_s"])
    timed_out = over_output = over_workspace = exited = False
    status, usage = 0, None
    init = os.getpid() == 1 or _SUBREAPER
    scan_at, scan_every = (start if _WORKSPACE_CAP else math.inf), 0.01
    while open_fds or not exited:
        now = time.monotonic()
        wait = deadline - now
        if wait <= 0 and not exited:
            timed_out = True
            break
        if now >= scan_at:  # a capped workspace, measured as the job writes (about 10% of the time, 10 to 100 ms)
            used = _workspace_bytes(_WORKSPACE)
            scan_every = min(0.1, max(0.01, 10 * (time.monotonic() - now)))
            scan_at = time.monotonic() + scan_every
            if used > _WORKSPACE_CAP and used > held:
                over_workspace = True
                break
        wait = min(wait, scan_at - now)
        if init:  # orphans of the job come to us: reap them as we go (zombies count against its process limit)
            wait = min(wait, 0.05)
            _reap_others(pid)
        ready, _, _ = select.select(list(open_fds) + ([] if exited else [pidfd]), [], [], max(wait, 0) + 0.01)
        for fd in ready:
            if fd == pidfd:
                _, status, usage = os.wait4(pid, 0)
                exited = True
                _kill_leftovers(pid)  # grandchildren holding the pipes die with the job
                deadline = min(deadline, time.monotonic() + 0.2)  # then drain what is left, briefly
                continue
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                open_fds.discard(fd)
                continue
            buf = bufs[fd]
            room_left = cap + 1 - len(buf)
            if room_left > 0:
                buf += chunk[:room_left]
            if len(buf) > cap:
                over_output = True
        if over_output:
            break
        if exited and open_fds and time.monotonic() > deadline:
            break
    _kill_leftovers(pid)
    if not exited:
        _, status, usage = os.wait4(pid, 0)
    wall = time.monotonic() - start
    for fd in (out_r, err_r, pidfd):
        os.close(fd)
    if _SUBREAPER:
        _kill_descendants()  # (isolation "none") daemons that left the job's group: dead before the result is out
    if _WORKSPACE_CAP:  # what the job left, once nothing of it can write any more
        used = _workspace_bytes(_WORKSPACE)
        if used > _WORKSPACE_CAP and used > held:
            over_workspace = True
        if over_workspace:
            note = f"\nsandbox: the workspace holds {used} bytes, over its limit of {_WORKSPACE_CAP} bytes\n"
            bufs[err_r] = bufs[err_r][: max(0, cap - len(note))] + note.encode()
    out, err = bytes(bufs[out_r][:cap]), bytes(bufs[err_r][:cap])
    truncated = len(bufs[out_r]) > cap or len(bufs[err_r]) > cap
    cpu = usage.ru_utime + usage.ru_stime
    oom_after = _oom_kills()
    oom = oom_before is not None and oom_after is not None and oom_after > oom_before
    outcome, code = _classify(timed_out, over_output or over_workspace, status, cpu, lim, bufs[err_r], oom)
    if code is None:
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    header = {"event": "done", "id": job_id, "outcome": outcome, "exit_code": code, "wall_s": wall, "cpu_s": cpu}
    header.update(out_n=len(out), err_n=len(err), truncated=truncated)
    _send(header, out, err)
    # Clean up only once the result is out (everything of the job is dead already): the host's deadline covers the
    # job, not the wiping. The next job is read only after this.
    if _KILL_ALL:
        _wait_reaped()
    _wipe(root, keep_root=False)
    _clean_up()


def _reap_others(job_pid):
    """Reap exited orphans without touching the job itself (its status is read through its pidfd)."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == job_pid:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(info.si_pid, 0)


def main():
    _set_no_dump()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # as PID 1 a handled signal could still be sent by a job
    if _SUBREAPER:
        with contextlib.suppress(Exception):
            _LIBC.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    os.makedirs(_BASE, exist_ok=True)
    _send({"event": "ready", "pid": os.getpid()})
    while True:
        job, blobs = _recv()
        if job is None:
            return
        _run_job(job, blobs)


if __name__ == "__main__":
    main()
