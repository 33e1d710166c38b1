"""The Docker backend: one long-lived, locked-down container per worker slot, with the same fork-per-job worker inside.

A container per job costs ~1 s here and ``docker exec`` per job ~65 ms; instead each slot starts one container
(no network, read-only root, tmpfs work dir, memory / pids / CPU limits, unprivileged user, no capabilities) and one
``python3 -S -I`` worker in it through a single exec whose stdin/stdout carry the job protocol. Works against any
engine ``docker.from_env()`` finds (``DOCKER_HOST`` included), or a list of Docker hosts: slots' containers are
spread over them round-robin, and a host that does not answer (at start, or when a container is created or a worker
started on it) is taken out with a warning and tried again after ``cooldown_s`` (:class:`propel.fleet.Fleet`); its
slots move to the other hosts.

A ``session()`` gets a container of its own (same lockdown) whose ``/work`` tmpfs is the workspace. Every container
is labelled with its purpose, host and owning pid, so ``reap_stale_containers`` (run by each new ``DockerSandbox``)
removes what a SIGKILLed process left behind, which no finalizer could; ``python -m propel.sandbox.cleanup`` does
the same on demand.

Inside a container the job runs as the same uid as its worker, so it can stop or kill it (under bubblewrap it
cannot): the host then gives the worker up at the job's limit + ``protocol.GRACE_S`` and restarts the container in
the background (a session's container is cleaned up in the background too), so ``run`` returns within the limit +
0.5 s. The container's OOM kills are read from its memory cgroup and reported as ``memory``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import weakref

from propel.fleet import Fleet
from propel.sandbox.docker_containers import (
    DEFAULT_IMAGE,
    REAPER_SCRIPT,
    USER,
    WORKDIR,
    container_labels,
    host_errors,
    reap_stale_containers,
)
from propel.sandbox.docker_session import DockerSessionBackend
from propel.sandbox.exec_channel import ExecChannel
from propel.sandbox.job import Job, Limits, Outcome, Result, SandboxError
from propel.sandbox.local import SCRUBBED_ENV, worker_source
from propel.sandbox.pool import WorkerPool
from propel.sandbox.protocol import Channel
from propel.sandbox.sandbox import Sandbox
from propel.sandbox.session import Session

logger = logging.getLogger(__name__)


class DockerSandbox(Sandbox):
    """Run jobs in long-lived Docker containers (one per worker slot) with per-job fork, limits and cleanup."""

    def __init__(
        self,
        limits: Limits | None = None,
        max_workers: int = 2,
        image: str = DEFAULT_IMAGE,
        python: str = "python3",
        cpus: float = 1.0,
        workdir_mb: int = 256,
        client=None,
        hosts: list[str] | None = None,
        cooldown_s: float = 60.0,
        api_timeout_s: float = 60.0,
    ):
        """Args:
        limits: default limits for jobs that carry none; ``memory_mb`` and ``max_processes`` also size each
            container's memory and pids cgroup limits (a job's own limits apply inside it as rlimits).
        max_workers: containers, i.e. jobs running at the same time (over all hosts).
        image: an image with ``python3`` on every host; ``scripts/docker_engine.sh`` builds ``propel-sandbox:py3``.
        python: interpreter inside the image.
        cpus: CPU quota per container.
        workdir_mb: size of the tmpfs holding the work dirs.
        client: a ``docker.DockerClient``; ``docker.from_env()`` (honours ``DOCKER_HOST``) by default.
        hosts: Docker host URLs (``unix:///var/run/docker.sock``, ``tcp://gpu-node-2:2376``, ``ssh://user@node``);
            containers are spread over them. Instead of ``client``.
        cooldown_s: how long a failed host stays out before it is pinged and used again.
        api_timeout_s: timeout of each Docker API call to a host in ``hosts``.
        """
        super().__init__(limits, max_workers)
        if cpus <= 0:
            raise ValueError(f"DockerSandbox cpus must be > 0, got {cpus}")
        if workdir_mb <= 0:
            raise ValueError(f"DockerSandbox workdir_mb must be > 0, got {workdir_mb}")
        if not image:
            raise ValueError("DockerSandbox image must be a non-empty image name, e.g. 'propel-sandbox:py3'")
        if client is not None and hosts:
            raise ValueError("DockerSandbox takes client or hosts, not both")
        if hosts is not None and not hosts:
            raise ValueError("DockerSandbox hosts must list at least one Docker host URL")
        self.image, self.python, self.cpus, self.workdir_mb = image, python, cpus, workdir_mb
        self.api_timeout_s = api_timeout_s
        self._clients: dict[str, object] = {}
        if hosts:
            names = list(hosts)
        else:
            import docker
            from docker.errors import DockerException

            try:
                self._clients["default"] = client or docker.from_env()
            except DockerException as e:
                raise SandboxError(
                    f"no Docker engine answers ({e}); start one with `sudo bash scripts/docker_engine.sh` "
                    "or point DOCKER_HOST at one"
                ) from e
            names = ["default"]
        self.hosts: Fleet[str] = Fleet(
            names, routing="round_robin", cooldown_s=cooldown_s, health_check=self._host_ready, what="Docker host"
        )
        problems = {}
        for host in names:
            problem = self._check_host(host)
            if problem:
                problems[host] = problem
                self.hosts.failed(host, problem)
        if len(problems) == len(names):
            detail = "; ".join(f"{h}: {p}" for h, p in problems.items()) if hosts else next(iter(problems.values()))
            raise SandboxError(detail if not hosts else f"no Docker host is usable ({detail})")
        self.client = self._clients[self.hosts.in_service()[0]]
        """The first usable host's client."""
        self._code = worker_source()
        self._containers: list = [None] * max_workers
        self._restarts: dict[int, threading.Thread] = {}  # slot -> restart of its container after a lost worker
        self._lost = threading.local()  # .host: the host that died under this thread's job (see run)
        self._pool = WorkerPool(self._spawn, max_workers, on_lost=self._on_lost)
        weakref.finalize(self, self.close)  # workers/containers go away at exit even without close()

    # ---- hosts ----
    def _client(self, host: str):
        """The client of ``host``, made on first use (making one asks the host its API version)."""
        if host not in self._clients:
            import docker

            self._clients[host] = docker.DockerClient(base_url=host, timeout=self.api_timeout_s)
        return self._clients[host]

    def _host_ready(self, host: str) -> bool:
        return not self._check_host(host)

    def _check_host(self, host: str) -> str:
        """Why ``host`` cannot run sandbox containers now ("" if it can); removes what dead processes left on it."""
        from docker.errors import ImageNotFound

        try:
            client = self._client(host)
            client.ping()
        except host_errors() as e:
            return (
                f"no Docker engine answers ({e}); start one with `sudo bash scripts/docker_engine.sh` "
                "or point DOCKER_HOST at one"
            )
        try:
            client.images.get(self.image)
        except ImageNotFound:
            return (
                f"Docker image {self.image!r} is missing; build propel-sandbox:py3 with "
                "`sudo bash scripts/docker_engine.sh` or pass image= an image that has python3"
            )
        except host_errors() as e:
            return f"cannot look up image {self.image!r} ({e})"
        try:
            reaped = reap_stale_containers(client)
        except host_errors() as e:
            logger.warning("could not look for sandbox containers left by dead processes: %s", e)
        else:
            if reaped:
                logger.info("removed %d sandbox container(s) left behind by dead processes", reaped)
        return ""

    def host_of(self, container) -> str:
        """The host (as named in ``hosts``) a container of this sandbox runs on."""
        return next(h for h, c in self._clients.items() if c is container.client)

    def _container(self, slot: int):
        restart = self._restarts.pop(slot, None)
        if restart is not None:
            restart.join()
        if self._containers[slot] is None:
            self._containers[slot] = self._start_container()
        return self._containers[slot]

    def _start_container(self, kind: str = "worker", limits: Limits | None = None):
        """A started, locked-down container on a host in service, moving on to the next host when one fails."""
        errors = []
        for _ in range(len(self.hosts)):
            host = self.hosts.pick()
            try:
                container = self._create_container(self._client(host), kind, limits)
            except (SandboxError, *host_errors()) as e:
                errors.append(str(e))
                self.hosts.failed(host, str(e).splitlines()[0][:200])
                continue
            self.hosts.succeeded(host)
            return container
        if len(self.hosts) == 1:
            raise SandboxError(errors[-1])
        raise SandboxError(f"no Docker host could start a sandbox container ({self.hosts.summary()}): {errors[-1]}")

    def _create_container(self, client, kind: str, limits: Limits | None):
        """A started, locked-down container on ``client``'s host; ``limits`` (default: the sandbox's) size its
        cgroup limits."""
        from docker.errors import DockerException

        limits = limits or self.limits
        mem = f"{limits.memory_mb + 128}m"
        try:
            container = client.containers.create(
                self.image,
                [self.python, "-S", "-I", "-c", REAPER_SCRIPT],
                network_mode="none",
                mem_limit=mem,
                memswap_limit=mem,
                pids_limit=limits.max_processes + 8,
                nano_cpus=int(self.cpus * 1e9),
                read_only=True,
                # owner via uid/gid: docker forgets a tmpfs `mode` across restarts
                tmpfs={WORKDIR: f"size={self.workdir_mb}m,uid=65534,gid=65534,mode=0700,exec", "/tmp": "size=64m"},
                user=USER,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                environment=SCRUBBED_ENV,
                labels=container_labels(kind),
            )
        except DockerException as e:
            raise SandboxError(f"cannot create a sandbox container from image {self.image!r}: {e}") from e
        try:
            container.start()
        except DockerException as e:
            container.remove(force=True)
            raise SandboxError(
                f"cannot start a sandbox container from image {self.image!r} (it needs python3 "
                f"readable by uid 65534): {e}"
            ) from e
        return container

    def _spawn(self, slot: int) -> Channel:
        """The slot's worker; if its host fails to start it, the host is taken out and the slot moves to another."""
        config = {"kill_all": True, "base": WORKDIR, "nproc": False, "scratch": ["/tmp", "/dev/shm", "/dev/mqueue"]}
        for attempt in range(len(self.hosts) + 1):
            container = self._container(slot)
            try:
                return self._exec_worker(container, config)
            except host_errors() as e:
                if attempt == len(self.hosts):
                    raise SandboxError(f"cannot start a sandbox worker: {e}") from e
                self.hosts.failed(self.host_of(container), f"cannot start a worker: {str(e)[:200]}")
                self._remove(slot)
        raise AssertionError("unreachable")

    def _exec_worker(self, container, config: dict) -> Channel:
        """Start the worker in ``container`` through one exec whose stdin/stdout carry the job protocol."""
        api = container.client.api
        exec_id = api.exec_create(
            container.id,
            [self.python, "-S", "-I", "-c", self._code, json.dumps(config)],
            stdin=True,
            stdout=True,
            stderr=True,
            user=USER,
            workdir=WORKDIR,
            environment=dict(SCRUBBED_ENV, HOME=WORKDIR),
        )["Id"]
        return ExecChannel(api.exec_start(exec_id, socket=True))

    def _on_lost(self, slot: int, pid: int | None) -> None:
        """A lost worker may leave a job running (or a full pids cgroup): its container is restarted, which kills
        every process in it and gives it fresh tmpfs mounts (much faster than creating a new container). The restart
        runs in the background, so that the lost job's result is not held up by it; the slot's next job waits. With
        several hosts, a lost worker whose host no longer answers takes the host out instead (``run`` then runs the
        job again, once, on another host)."""

        container = self._containers[slot]
        if container is None:
            return
        host = self.host_of(container)
        if len(self.hosts) > 1 and not self._answers(host):  # the host went away, not just the worker
            self.hosts.failed(host, "it lost a worker and no longer answers")
            self._containers[slot] = None  # nothing to restart there; the slot's next container goes elsewhere
            self._lost.host = host
            return

        def restart() -> None:
            try:
                container.restart(timeout=0)
            except host_errors() as e:  # its host may be gone: the slot's next container goes where one answers
                self.hosts.failed(self.host_of(container), f"cannot restart a container: {str(e)[:200]}")
                self._remove(slot)

        thread = threading.Thread(target=restart, name=f"propel-sandbox-restart-{slot}", daemon=True)
        self._restarts[slot] = thread
        thread.start()

    def _answers(self, host: str) -> bool:
        try:
            return bool(self._client(host).ping())
        except host_errors():
            return False

    def _remove(self, slot: int) -> None:
        container, self._containers[slot] = self._containers[slot], None
        if container is not None:
            with contextlib.suppress(Exception):  # already gone is fine
                container.remove(force=True)

    def warm_up(self) -> DockerSandbox:
        """Start all containers and workers now."""
        self._pool.warm_up()
        return self

    def run(self, job: Job) -> Result:
        """Run one job (see ``Sandbox.run``). The containers' cgroup limits come from the sandbox's own limits: a job
        asking for more memory or processes than they allow gets only that much, and a failed result says so."""
        job.validate()
        limits = job.limits or self.limits
        self._lost.host = None
        result = self._pool.run(job, limits)
        if self._lost.host is not None and self.hosts.in_service():  # its host died under it: once more, elsewhere
            logger.warning(
                "a sandbox job was lost with Docker host %s; running it again on another host", self._lost.host
            )
            self._lost.host = None
            result = self._pool.run(job, limits)
        capped = [
            f"{name}={getattr(limits, name)} above the container's {name}={getattr(self.limits, name)}"
            for name in ("memory_mb", "max_processes")
            if getattr(limits, name) > getattr(self.limits, name)
        ]
        if capped and result.outcome is not Outcome.OK:
            note = f"sandbox: this job's {' and '.join(capped)} (the DockerSandbox's limits size its containers)"
            result.stderr = f"{result.stderr}\n{note}" if result.stderr else note
        return result

    def session(self, limits: Limits | None = None) -> Session:
        """A persistent workspace in a new container of its own (see ``Sandbox.session``): ``/work``, a tmpfs.

        ``limits`` (default: the sandbox's) also size the container's memory and pids limits, which cap what any
        one command's own limits can allow. Opening one creates a container (about as long as ``warm_up`` per slot).
        """
        limits = limits or self.limits
        limits.validate()
        backend = DockerSessionBackend(lambda: self._start_container("session", limits), self._exec_worker, self.python)
        return self._track(Session(backend, limits))

    def close(self) -> None:
        super().close()
        self._pool.close()
        for restart in list(self._restarts.values()):
            restart.join()
        for slot in range(len(self._containers)):
            self._remove(slot)
