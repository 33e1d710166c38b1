"""The embedded default backend: pre-started Python workers under bubblewrap that fork one child per job.

Per job the child gets a fresh work dir, its own session, rlimits (CPU, address space, processes, file size, open
files), a scrubbed environment, and is killed with everything it started at the wall-clock limit. With bubblewrap
(the default when installed) the worker also has no network, sees only the system runtime read-only (no host
sockets, homes, checkout or host /tmp: see ``bwrap.py``), size-capped private scratch emptied after every job, and
an unprivileged uid in its own user and PID namespaces where it is PID 1, so a job can neither stop nor kill it.

Isolation "none" is for trusted code and tests only: rlimits, a scrubbed environment and a fresh work dir, nothing
more. The job sees and can write whatever the trainer's uid can (host files, /dev/shm, Unix sockets such as the
Docker daemon's), has the network, and can signal its worker. Its daemons, even double-forked ones, are killed after
each job and by ``close()`` (the worker is a child subreaper), but nothing else it did is undone.

A ``session()`` is a host temp dir bound read-write into its own worker's bubblewrap (or simply the worker's cwd with
isolation "none"); it lives on the host, so it survives the worker being killed and replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from importlib import resources

from propel.sandbox.bwrap import bwrap_argv, bwrap_path, python_home
from propel.sandbox.job import Job, Limits, Result, SandboxError
from propel.sandbox.pool import WorkerPool
from propel.sandbox.processes import kill_tree, kill_uid
from propel.sandbox.protocol import Channel, WorkerLost
from propel.sandbox.sandbox import Sandbox
from propel.sandbox.session import Session, SessionBackend
from propel.sandbox.spawner import spawn_lasting
from propel.sandbox.uids import UidLeases

ISOLATIONS = ("auto", "bwrap", "none")
SCRUBBED_ENV = {
    "PATH": "/usr/local/bin:/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "LC_ALL": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    # The job's memory limit is an address-space limit (RLIMIT_AS), and glibc reserves a 64 MiB malloc arena for each
    # new thread: at 512 MiB a job could start only 14 threads (a repository suite's threading tests failed with
    # "can't start new thread"). Two arenas keep the limit about memory used, not address space reserved (54 threads).
    "MALLOC_ARENA_MAX": "2",
}


_INLINED = re.compile(r"^from propel\.sandbox\.(\w+) import [^\n#]*# inlined[^\n]*$", re.MULTILINE)
"""An import line of the worker that names a standard-library-only module of this package to carry along."""


def worker_source() -> str:
    """The text of the in-sandbox worker, passed to the interpreter with ``-c`` (no file access needed): ``_worker.py``
    with each ``# inlined`` import replaced by the module's own text (``processes``, ``scratch``: the host imports the
    same code)."""
    package = resources.files("propel.sandbox")
    return _INLINED.sub(
        lambda m: package.joinpath(f"{m.group(1)}.py").read_text(), package.joinpath("_worker.py").read_text()
    )


def default_python() -> str:
    """The system Python (reachable by an unprivileged uid), else this interpreter."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(candidate, os.X_OK):
            return candidate
    return sys.executable


class PipeChannel(Channel):
    """A worker process on the host, spoken to over its stdin/stdout pipes."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: str, user: int | None, on_close=None):
        self._log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the worker
        kwargs = {"user": user, "group": user, "extra_groups": []} if user is not None else {}
        # Forked from the process-lifetime spawner thread: bwrap's --die-with-parent fires when the forking *thread*
        # ends, which would kill a worker started from a run_many pool thread right after that call returned.
        self.proc = spawn_lasting(
            lambda: subprocess.Popen(
                argv,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=env,
                cwd=cwd,
                start_new_session=True,
                **kwargs,
            )
        )
        self._out = self.proc.stdout.fileno()
        self._on_close = on_close

    def send(self, data: bytes) -> None:
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError) as e:
            raise WorkerLost(f"worker is gone ({e})") from e

    def recv_exact(self, n: int, deadline: float) -> bytes:
        chunks, got = [], 0
        while got < n:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise WorkerLost("worker did not answer before the guard deadline", timed_out=True)
            ready, _, _ = select.select([self._out], [], [], wait)
            if not ready:
                continue
            chunk = os.read(self._out, min(n - got, 1 << 20))
            if not chunk:
                code = self.proc.poll()
                raise WorkerLost(f"worker exited (status {code})" if code is not None else "worker closed its output")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def diagnostics(self) -> str:
        self._log.seek(0)
        return self._log.read()[-2000:].decode("utf-8", errors="replace")

    def close(self) -> None:
        kill_tree(self.proc.pid)  # with isolation "none", processes that left the worker's session too
        with contextlib.suppress(OSError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()
        self._log.close()
        if self._on_close is not None:
            self._on_close()


class LocalSandbox(Sandbox):
    """Run jobs on this machine: forked from warm workers, under bubblewrap when it is installed.

    ``LocalSandbox().run(Job(source="print(1)", limits=Limits(timeout_s=2)))`` -> ``Result(outcome=ok, stdout="1\\n")``.
    """

    def __init__(
        self,
        limits: Limits | None = None,
        max_workers: int = 2,
        isolation: str = "auto",
        python: str | None = None,
        scratch_mb: int = 256,
        uid_base: int = 61000,
        workspace_mb: int = 256,
    ):
        """Args:
        limits: default limits for jobs that carry none.
        max_workers: jobs run at the same time (one warm worker each).
        isolation: "bwrap" (required), "none" (rlimits and a scrubbed environment only: no protection of host files,
            sockets or network, see the module docstring) or "auto" (bwrap if installed).
        python: interpreter for ``source`` jobs and the workers; the system ``python3`` by default (run with ``-S -I``:
            standard library only).
        scratch_mb: size of each worker's private /tmp, which holds the jobs' work dirs (bwrap only).
        workspace_mb: size cap of each session's workspace, a host folder (a tmpfs would not outlive its worker).
            The worker measures it while a command runs (every 10 to 100 ms) and when it ends: a command that grows
            it past the cap is killed and reported as ``output_limit`` with a note saying so (it can overshoot by
            what it writes between two measurements). The workspace keeps what the command left; a command that
            does not grow it (reading, deleting) runs normally. Docker sessions are bounded by their ``/work``
            tmpfs (``workdir_mb``) instead.
        uid_base: when running as root, each worker slot and each open session runs as a host uid of its own from
            ``uid_base`` on, so that process limits apply (root ignores ``RLIMIT_NPROC``) and jobs cannot signal
            each other; uids are leased host-wide (``sandbox.uids``), so sandboxes of other processes never share
            one.
        """
        super().__init__(limits, max_workers)
        if isolation not in ISOLATIONS:
            raise ValueError(f"LocalSandbox isolation must be one of {ISOLATIONS}, got {isolation!r}")
        self.bwrap = bwrap_path()
        if isolation == "bwrap" and self.bwrap is None:
            raise SandboxError("LocalSandbox(isolation='bwrap') needs bubblewrap: apt-get install bubblewrap")
        self.isolation = "bwrap" if (isolation != "none" and self.bwrap) else "none"
        self.python = python or default_python()
        if shutil.which(self.python) is None:
            raise ValueError(f"LocalSandbox python {self.python!r} is not an executable; pass python=/path/to/python3")
        if scratch_mb <= 0:
            raise ValueError(f"LocalSandbox scratch_mb must be > 0, got {scratch_mb}")
        if isinstance(workspace_mb, bool) or not isinstance(workspace_mb, int) or workspace_mb <= 0:
            raise ValueError(f"LocalSandbox workspace_mb must be an int > 0, got {workspace_mb!r}")
        self.scratch_mb, self.workspace_mb = scratch_mb, workspace_mb
        self.uid_base = uid_base
        self._uids = UidLeases(uid_base) if os.geteuid() == 0 else None
        self._slot_uids: dict[int, int] = {}
        self._code = worker_source()
        self._pool = WorkerPool(self._spawn, max_workers, on_lost=self._on_lost)
        weakref.finalize(self, self.close)  # workers/containers go away at exit even without close()

    def _spawn(self, slot: int) -> Channel:
        if self._uids is not None and slot not in self._slot_uids:
            self._slot_uids[slot] = self._uids.claim()  # the slot keeps it for the sandbox's life
        return self._spawn_worker(self._slot_uids.get(slot))

    def _spawn_worker(self, user: int | None, workspace: str | None = None) -> Channel:
        """A worker running as host ``user`` (None: as this process); with ``workspace``, a session's worker."""
        if self.isolation == "bwrap":
            # The worker is PID 1 (nproc_base: it and bwrap's outer process); scratch: what a job can write.
            config = {"kill_all": True, "base": "/tmp", "nproc": True, "nproc_base": 2}
            config["scratch"] = ["/tmp", "/dev/shm", "/dev/mqueue"]
            writable, home = [], "/tmp"
            if workspace is not None:
                config.update(workspace=workspace, workspace_bytes=self.workspace_mb << 20)
                writable, home = [workspace], workspace
            python = os.path.realpath(self.python)
            inner = [python, "-S", "-I", "-c", self._code, json.dumps(config)]
            argv = bwrap_argv(
                inner,
                self.scratch_mb,
                bwrap=self.bwrap,
                writable=writable,
                chdir=home,
                readable=[python_home(python)],
                as_pid_1=True,
            )
            env = dict(SCRUBBED_ENV, HOME=home)
            return PipeChannel(argv, env, cwd="/", user=user)
        base = tempfile.mkdtemp(prefix="propel-sandbox-")
        if user is not None:
            os.chown(base, user, user)
        # Without namespaces RLIMIT_NPROC counts all processes of the uid: only meaningful with a dedicated uid. The
        # worker is a subreaper, so a job's double-forked daemons come back to it and die after the job.
        config = {"kill_all": False, "base": base, "nproc": user is not None, "nproc_base": 1, "scratch": []}
        config["subreaper"] = True
        if workspace is not None:
            config.update(workspace=workspace, workspace_bytes=self.workspace_mb << 20)
        argv = [self.python, "-S", "-I", "-c", self._code, json.dumps(config)]
        cwd = workspace or base
        return PipeChannel(
            argv, dict(SCRUBBED_ENV, HOME=cwd), cwd=cwd, user=user, on_close=lambda: shutil.rmtree(base, True)
        )

    def _on_lost(self, slot: int, pid: int | None) -> None:
        """Without a PID namespace, a job whose worker died may still run: kill its process group."""
        if self.isolation == "none" and pid is not None:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)

    def warm_up(self) -> LocalSandbox:
        """Start all workers now (otherwise the first job on each slot pays ~50 ms)."""
        self._pool.warm_up()
        return self

    def run(self, job: Job) -> Result:
        job.validate()
        return self._pool.run(job, job.limits or self.limits)

    def session(self, limits: Limits | None = None) -> Session:
        """A persistent workspace in a host temp dir with its own worker (see ``Sandbox.session``).

        As root the session also runs as its own host uid, so ``RLIMIT_NPROC`` separates it from the pool and from
        other sessions. With isolation "none" only the command's process group is killed after each command (a
        ``setsid`` daemon lives on until ``close()``, which, as root, kills every process of the session's uid).
        """
        limits = limits or self.limits
        limits.validate()
        return self._track(Session(_LocalSessionBackend(self), limits))

    def _claim_session_uid(self) -> int | None:
        """A host uid no one else holds (None when not root)."""
        return self._uids.claim() if self._uids is not None else None

    def _release_session_uid(self, uid: int | None) -> None:
        if uid is not None and self._uids is not None:
            self._uids.release(uid)

    def close(self) -> None:
        super().close()
        self._pool.close()
        if self._uids is not None:
            self._uids.close()


def _remove_tree(path: str) -> None:
    """Delete a workspace whatever modes its commands left on it (without root, a locked subdirectory would stop
    ``rmtree``): make every real directory in it accessible again, never following a symlink, then delete."""
    try:
        shutil.rmtree(path)
        return
    except FileNotFoundError:
        return
    except OSError:
        pass
    with contextlib.suppress(OSError):
        os.chmod(path, 0o700)
    for root, dirs, _ in os.walk(path):
        for name in dirs:
            sub = os.path.join(root, name)
            if not os.path.islink(sub):
                with contextlib.suppress(OSError):
                    os.chmod(sub, 0o700)
    shutil.rmtree(path, ignore_errors=True)


class _LocalSessionBackend(SessionBackend):
    """A host temp dir as the workspace (owned by the session's uid when root), and a worker spawned around it."""

    def __init__(self, sandbox: LocalSandbox):
        super().__init__()
        self._sandbox = sandbox
        self.workspace = tempfile.mkdtemp(prefix="propel-ws-")
        self._user = sandbox._claim_session_uid()
        try:
            if self._user is not None:
                os.chown(self.workspace, self._user, self._user)
        except BaseException:
            self.close()
            raise

    def spawn(self, slot: int) -> Channel:
        return self._sandbox._spawn_worker(self._user, workspace=self.workspace)

    def on_lost(self, slot: int, pid: int | None) -> None:
        self._sandbox._on_lost(slot, pid)
        self._kill_leftovers()

    def _kill_leftovers(self) -> None:
        """With isolation "none" and a uid of its own, a command's setsid'd daemons survive its process group."""
        if self._sandbox.isolation == "none" and self._user is not None:
            kill_uid(self._user)

    def close(self) -> None:
        try:
            self._kill_leftovers()
            _remove_tree(self.workspace)
        finally:
            self._sandbox._release_session_uid(self._user)
