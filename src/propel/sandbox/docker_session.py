"""A Docker sandbox session: one container of its own whose ``/work`` tmpfs is the workspace kept between commands."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import Any

from propel.sandbox.docker_containers import KILL_ALL_SCRIPT, USER, WORKDIR
from propel.sandbox.job import SandboxError
from propel.sandbox.local import SCRUBBED_ENV
from propel.sandbox.protocol import Channel
from propel.sandbox.session import SessionBackend

_SESSION_CONFIG = {
    "kill_all": True,
    "base": "/tmp",  # job roots (stdin) go to /tmp; /work is the workspace itself
    "nproc": False,
    "scratch": ["/dev/shm", "/dev/mqueue"],
    "workspace": WORKDIR,
}


class DockerSessionBackend(SessionBackend):
    """One container per session. A worker lost mid-command is cleaned up by killing every process of the sandbox
    uid from a fresh exec, which keeps the tmpfs workspace; only if that fails is the container restarted (which
    empties it), and the next command's stderr says so. The clean-up runs in the background, so that the lost
    command's result is not held up by it (a stopped worker is given up at the limit + ``GRACE_S``); the next
    command's worker starts once it is done."""

    workspace = WORKDIR

    def __init__(self, start: Callable[[], Any], exec_worker: Callable[[Any, dict], Channel], python: str):
        """``start`` creates the session's container, ``exec_worker`` starts a worker in one, ``python`` is the
        container's interpreter (the ``DockerSandbox``'s)."""
        super().__init__()
        self._start, self._exec_worker, self._python = start, exec_worker, python
        self._closed = False
        self._cleanup: tuple[threading.Thread, list[bool]] | None = None
        """The background clean-up after a lost worker, and whether it succeeded (once joined)."""
        self.container = start()

    def _wait_cleanup(self) -> bool:
        """Wait for the clean-up after a lost worker, if one runs; False when it failed."""
        cleanup, self._cleanup = self._cleanup, None
        if cleanup is None:
            return True
        thread, ok = cleanup
        thread.join()
        return bool(ok and ok[0])

    def spawn(self, slot: int) -> Channel:
        from docker.errors import DockerException

        if not self._wait_cleanup():
            self._restart("its worker was lost and the clean-up failed")
        if self.container is None:
            self.container = self._start()
        try:
            return self._exec_worker(self.container, _SESSION_CONFIG)
        except DockerException as e:
            if self._running():  # engine trouble, not a dead container: keep the workspace for a later try
                raise SandboxError(f"cannot start the sandbox session's worker: {e}") from e
        self._restart("its container had stopped")  # stopped or gone: a fresh one, with an empty workspace
        if self.container is None:
            self.container = self._start()
        return self._exec_worker(self.container, _SESSION_CONFIG)

    def _running(self) -> bool:
        from docker.errors import DockerException, NotFound

        try:
            self.container.reload()
        except NotFound:
            return False
        except DockerException:
            return True  # cannot tell: assume it is, rather than throw the workspace away
        return self.container.status == "running"

    def on_lost(self, slot: int, pid: int | None) -> None:
        if self._closed or self.container is None:
            return

        ok: list[bool] = []
        thread = threading.Thread(
            target=lambda: ok.append(self._kill_all()), name="propel-sandbox-session-cleanup", daemon=True
        )
        self._cleanup = (thread, ok)
        thread.start()  # if it fails, the next spawn restarts the container (and that command's result says so)

    def _kill_all(self) -> bool:
        from docker.errors import DockerException

        api = self.container.client.api
        try:
            exec_id = api.exec_create(
                self.container.id,
                [self._python, "-S", "-I", "-c", KILL_ALL_SCRIPT],
                user=USER,
                environment=SCRUBBED_ENV,
            )["Id"]
            api.exec_start(exec_id)
            return api.exec_inspect(exec_id).get("ExitCode") == 0
        except DockerException:
            return False

    def _restart(self, why: str) -> None:
        """Restart the container (a new one if that fails, on the next spawn); never raises."""
        from docker.errors import DockerException

        self.notes.append(f"sandbox session: {why}; its container was restarted and the workspace is lost (empty)")
        try:
            self.container.restart(timeout=0)
        except DockerException:
            with contextlib.suppress(Exception):
                self.container.remove(force=True)
            self.container = None

    def close(self) -> None:
        self._closed = True
        self._wait_cleanup()
        container, self.container = self.container, None
        if container is not None:
            with contextlib.suppress(Exception):  # already gone is fine
                container.remove(force=True)
