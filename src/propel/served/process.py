"""An OpenEnv server in a child process (``propel serve-env``), started and stopped with time limits: what tests and
``benchmarks/openenv_overhead.py`` use to put a real server on loopback."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Sequence


class ServerProcess:
    """``propel serve-env NAME --port 0`` as a child; ``url`` once it answers ``/health``.

    Args:
        name: a registered environment name or an import path.
        args: further ``serve-env`` arguments (``--env-kwargs``, ``--max-sessions``).
        pythonpath: folders prepended to the child's ``PYTHONPATH`` (where an import path's module lives).
        startup_timeout_s: limit for the server to print its address and answer ``/health``.
    """

    def __init__(
        self, name: str, args: Sequence[str] = (), pythonpath: Sequence[str] = (), startup_timeout_s: float = 120.0
    ) -> None:
        self.name, self.args, self.startup_timeout_s = name, list(args), startup_timeout_s
        self.env = dict(os.environ)
        if pythonpath:
            self.env["PYTHONPATH"] = os.pathsep.join([*map(str, pythonpath), self.env.get("PYTHONPATH", "")])
        self.proc: subprocess.Popen | None = None
        self.url: str | None = None
        self.output: list[str] = []
        self._reader: threading.Thread | None = None

    def start(self, port: int = 0) -> ServerProcess:
        """Start the child (``port`` 0: any free one; give the old port to restart on the same address)."""
        cmd = [sys.executable, "-m", "propel.cli", "serve-env", self.name, "--port", str(port), *self.args]
        self.output = []  # this run's lines (a restart reads its own address)
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=self.env, start_new_session=True
        )
        first = threading.Event()
        self._reader = threading.Thread(target=self._read, args=(self.proc, first), daemon=True)
        self._reader.start()
        deadline = time.monotonic() + self.startup_timeout_s
        if not first.wait(self.startup_timeout_s) or not self.output or not self.output[0].startswith("serving "):
            self.kill()
            raise RuntimeError(f"propel serve-env {self.name} did not start: {''.join(self.output)[-2000:]}")
        self.url = self.output[0].split(" on ", 1)[1].strip()
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"propel serve-env {self.name} never answered /health at {self.url}")

    def _read(self, proc: subprocess.Popen, first: threading.Event) -> None:
        for line in proc.stdout:
            self.output.append(line)
            first.set()
        first.set()

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def kill(self) -> None:
        """SIGKILL the server (and anything it started): what a crashed host looks like to its clients."""
        self._signal(signal.SIGKILL)

    def stop(self, timeout_s: float = 15.0) -> None:
        """SIGTERM, then SIGKILL after ``timeout_s``."""
        self._signal(signal.SIGTERM, timeout_s)

    def _signal(self, sig: int, timeout_s: float = 15.0) -> None:
        proc = self.proc
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout_s)
        self._reader.join(timeout_s)  # its last lines read into ``output``

    def __enter__(self) -> ServerProcess:
        return self if self.url else self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
