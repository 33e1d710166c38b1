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

import contextlib
import ctypes
import json
import math
import os
import select
import signal
import struct
import sys
import tempfile
import time

from propel.sandbox.job_process import classify, run_child  # inlined by local.worker_source
from propel.sandbox.processes import kill_tree, reap_orphans  # inlined by local.worker_source
from propel.sandbox.scratch import oom_kills, remove_ipc, wipe, workspace_bytes  # inlined by local.worker_source

_LEN = struct.Struct(">I")
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
# to 100 ms) and when it ends; a command that grows the workspace past it is killed and reported as output_limit, and
# so is one that ends with it over the cap having written to it (deleting a file, then writing as much back in, grows
# it too); one that only reads or deletes is not.
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


def _has_children():
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _kill_descendants():
    """SIGKILL every descendant (orphans came back to us as subreaper), until none is left. As a subreaper, a
    descendant that outlived the job has an ancestor that is our child: with no child, there is nothing to do."""
    if _has_children():
        kill_tree(os.getpid(), rounds=50, reap=True)


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
            reap_orphans()
        others = [p for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
        if not others:
            return
        time.sleep(0.002)


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
        wipe(path, keep_root=True, keep=keep)
    remove_ipc(_LIBC)


def _open_job(job, blobs):
    """A fresh job root with the job's files and stdin written, or ``(root, problem)`` with why they could not be."""
    try:
        root = tempfile.mkdtemp(prefix="job-", dir=_BASE)
    except OSError:
        _clean_up()  # a full base (a bug or a leftover): make room once
        root = tempfile.mkdtemp(prefix="job-", dir=_BASE)
    workdir = os.path.join(root, "work") if _WORKSPACE is None else _WORKSPACE
    if job.get("too_big"):
        total, free = job["too_big"]
        problem = f"sandbox cannot write the job's files and stdin: {total} bytes, {free} bytes free\n"
        return root, workdir, problem.encode()
    return root, workdir, _write_inputs(root, workdir, job.get("files", []), blobs)


def _refuse(job, root, problem):
    """The job does not run: an error result, and the worker lives on."""
    wipe(root, keep_root=False)
    _clean_up()
    _send({"event": "started", "id": job.get("id"), "pid": None})
    err = problem[: int(job["limits"]["max_output_bytes"])]
    header = {"event": "done", "id": job.get("id"), "outcome": "error", "exit_code": None, "wall_s": 0.0, "cpu_s": 0.0}
    header.update(out_n=0, err_n=len(err), truncated=False)
    _send(header, b"", err)


class _Watch:
    """One running job seen from the worker: its output (capped), its wall clock and, for a capped workspace, the
    bytes it has written. ``run`` returns once the job has ended and its pipes are drained, or a limit was crossed."""

    def __init__(self, pid, out_r, err_r, lim, held, since_ns):
        self.pid, self.out_r, self.err_r = pid, out_r, err_r
        self.since_ns = since_ns
        self.cap = int(lim["max_output_bytes"])
        self.start = time.monotonic()
        self.deadline = self.start + float(lim["timeout_s"])
        self.held = held
        self.bufs = {out_r: bytearray(), err_r: bytearray()}
        self.timed_out = self.over_output = self.over_workspace = self.exited = False
        self.status, self.usage = 0, None

    def run(self):
        pidfd = os.pidfd_open(self.pid)
        open_fds = {self.out_r, self.err_r}
        init = os.getpid() == 1 or _SUBREAPER
        scan_at, scan_every = (self.start if _WORKSPACE_CAP else math.inf), 0.01
        while open_fds or not self.exited:
            now = time.monotonic()
            wait = self.deadline - now
            if wait <= 0 and not self.exited:
                self.timed_out = True
                break
            if now >= scan_at:  # a capped workspace, measured as the job writes (about 10% of the time, 10-100 ms)
                if self._workspace_over():
                    break
                scan_every = min(0.1, max(0.01, 10 * (time.monotonic() - now)))
                scan_at = time.monotonic() + scan_every
            wait = min(wait, scan_at - now)
            if init:  # orphans of the job come to us: reap them as we go (zombies count against its process limit)
                wait = min(wait, 0.05)
                _reap_others(self.pid)
            watched = list(open_fds) + ([] if self.exited else [pidfd])
            ready, _, _ = select.select(watched, [], [], max(wait, 0) + 0.01)
            for fd in ready:
                if fd == pidfd:
                    self._reap()
                    self.deadline = min(self.deadline, time.monotonic() + 0.2)  # then drain what is left, briefly
                elif not self._read(fd):
                    open_fds.discard(fd)
            if self.over_output or (self.exited and open_fds and time.monotonic() > self.deadline):
                break
        _kill_leftovers(self.pid)
        if not self.exited:
            self._reap()
        os.close(pidfd)

    def _reap(self):
        _, self.status, self.usage = os.wait4(self.pid, 0)
        self.exited = True
        _kill_leftovers(self.pid)  # grandchildren holding the pipes die with the job

    def _read(self, fd):
        chunk = os.read(fd, 1 << 16)
        buf = self.bufs[fd]
        room_left = self.cap + 1 - len(buf)
        if room_left > 0:
            buf += chunk[:room_left]
        self.over_output = self.over_output or len(buf) > self.cap
        return bool(chunk)

    def _workspace_over(self, ended=False):
        """Over the cap by this job: grown past what it found, or (once it has ended) left over the cap with files
        it wrote. While it runs, a workspace already over the cap is not held against it: it may be cleaning up."""
        used, written = workspace_bytes(_WORKSPACE, self.since_ns)
        self.used = used
        if used > _WORKSPACE_CAP and (used > self.held or (ended and written > 0)):
            self.over_workspace = True
        return self.over_workspace

    def finish(self, lim, oom):
        """The ``done`` header and the two streams, once nothing of the job can write any more."""
        wall = time.monotonic() - self.start
        if _WORKSPACE_CAP and self._workspace_over(ended=True):
            note = f"\nsandbox: the workspace holds {self.used} bytes, over its limit of {_WORKSPACE_CAP} bytes\n"
            note = note.encode()
            self.bufs[self.err_r] = self.bufs[self.err_r][: max(0, self.cap - len(note))] + note
        out, err = bytes(self.bufs[self.out_r][: self.cap]), bytes(self.bufs[self.err_r][: self.cap])
        truncated = len(self.bufs[self.out_r]) > self.cap or len(self.bufs[self.err_r]) > self.cap
        cpu = self.usage.ru_utime + self.usage.ru_stime
        over = self.over_output or self.over_workspace
        outcome, code = classify(self.timed_out, over, self.status, cpu, lim, self.bufs[self.err_r], oom)
        if code is None:
            code = -os.WTERMSIG(self.status) if os.WIFSIGNALED(self.status) else os.WEXITSTATUS(self.status)
        header = {"event": "done", "outcome": outcome, "exit_code": code, "wall_s": wall, "cpu_s": cpu}
        header.update(out_n=len(out), err_n=len(err), truncated=truncated)
        return header, out, err


def _run_job(job, blobs):
    held = workspace_bytes(_WORKSPACE) if _WORKSPACE_CAP else None  # before this job's files: they count too
    since_ns = time.time_ns()  # files changed after this are the job's (a coarse file clock may miss its first ms)
    root, workdir, problem = _open_job(job, blobs)
    if problem is not None:
        _refuse(job, root, problem)
        return
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    oom_before = oom_kills()
    pid = os.fork()
    if pid == 0:
        nproc_limit = _NPROC_BASE + int(job["limits"]["max_processes"]) if _USE_NPROC else None
        run_child(job, workdir, os.path.join(root, "stdin"), out_w, err_w, nproc_limit)
    os.close(out_w)
    os.close(err_w)
    _send({"event": "started", "id": job.get("id"), "pid": pid})
    watch = _Watch(pid, out_r, err_r, job["limits"], held, since_ns)
    watch.run()
    os.close(out_r)
    os.close(err_r)
    if _SUBREAPER:
        _kill_descendants()  # (isolation "none") daemons that left the job's group: dead before the result is out
    oom_after = oom_kills()
    oom = oom_before is not None and oom_after is not None and oom_after > oom_before
    header, out, err = watch.finish(job["limits"], oom)
    _send({**header, "id": job.get("id")}, out, err)
    # Clean up only once the result is out (everything of the job is dead already): the host's deadline covers the
    # job, not the wiping. The next job is read only after this.
    if _KILL_ALL:
        _wait_reaped()
    wipe(root, keep_root=False)
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
