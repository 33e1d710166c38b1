"""DockerSandbox over several Docker hosts: the local engine under two URLs, a TCP relay to it that is cut mid-run
and brought back, and a URL where no engine listens. Jobs finish on the hosts that answer; a host that fails is
logged, taken out, and used again after its cool-down."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from propel.engines.vllm_launch import free_port
from propel.sandbox import Job, Limits
from tests.conftest import missing_dependency

pytestmark = pytest.mark.docker

SOCKET = "/var/run/docker.sock"
LIMITS = Limits(timeout_s=5.0, memory_mb=256, max_processes=16)


class DockerRelay:
    """``tcp://127.0.0.1:<port>`` relaying bytes to the local engine's unix socket: a second, remote-looking host.
    ``stop`` closes the listener and every relayed connection, as a host that goes down does; ``start`` listens on
    the same port again."""

    def __init__(self) -> None:
        self.port = free_port()
        self._conns: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.start()

    @property
    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.port}"

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            engine = socket.socket(socket.AF_UNIX)
            engine.connect(SOCKET)
            self._conns += [client, engine]
            for a, b in ((client, engine), (engine, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close alone leaves it listening
        self._listener.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
            conn.close()
        self._conns = []


@pytest.fixture()
def sandbox_on(docker_sandbox_or_skip):
    made = []

    def make(hosts, **kwargs):
        made.append(docker_sandbox_or_skip(hosts=hosts, limits=LIMITS, **kwargs))
        return made[-1]

    yield make
    for sandbox in made:
        sandbox.close()


def run_all(sandbox, n: int) -> list:
    jobs = [Job(source=f"print({i} * 2)") for i in range(n)]
    with ThreadPoolExecutor(max_workers=4) as pool:
        return list(pool.map(sandbox.run, jobs))


def test_jobs_spread_over_two_hosts_and_an_unreachable_one_is_skipped(sandbox_on, caplog):
    if not os.path.exists(SOCKET):
        missing_dependency(f"no {SOCKET}")
    caplog.set_level(logging.INFO, logger="propel.fleet")
    dead = f"tcp://127.0.0.1:{free_port()}"
    hosts = [f"unix://{SOCKET}", f"unix://{os.path.realpath(SOCKET)}", dead]
    assert hosts[0] != hosts[1]  # the same engine under two addresses
    sandbox = sandbox_on(hosts, max_workers=2, cooldown_s=600)
    results = run_all(sandbox, 8)
    assert [r.stdout.strip() for r in results] == [str(i * 2) for i in range(8)], results
    used = sorted(sandbox.host_of(c) for c in sandbox._containers)
    assert used == sorted(hosts[:2])  # round-robin over the hosts that answer
    assert f"Docker host {dead} failed (no Docker engine answers" in caplog.text
    assert sandbox.hosts.in_service() == hosts[:2] and sandbox.hosts.state(dead).failures == 1


def test_a_host_cut_mid_run_is_taken_out_and_used_again_after_the_cooldown(sandbox_on, caplog):
    if not os.path.exists(SOCKET):
        missing_dependency(f"no {SOCKET}")
    caplog.set_level(logging.INFO, logger="propel.fleet")
    relay = DockerRelay()
    sandbox = sandbox_on([f"unix://{SOCKET}", relay.url], max_workers=2, cooldown_s=2.0)
    try:
        assert all(r.ok for r in run_all(sandbox, 4))
        assert sorted(sandbox.host_of(c) for c in sandbox._containers) == sorted([f"unix://{SOCKET}", relay.url])

        relay.stop()  # mid-run: the relayed host's worker connection and API go away
        results = run_all(sandbox, 6)
        assert [r.stdout.strip() for r in results] == [str(i * 2) for i in range(6)], results  # none lost
        assert f"Docker host {relay.url} failed" in caplog.text
        assert sandbox.hosts.in_service() == [f"unix://{SOCKET}"]
        assert {sandbox.host_of(c) for c in sandbox._containers if c is not None} == {f"unix://{SOCKET}"}

        relay.start()
        time.sleep(2.5)  # the cool-down: new containers (here: sessions') go to both hosts again
        sessions = [sandbox.session() for _ in range(2)]
        assert sorted(sandbox.host_of(s._backend.container) for s in sessions) == sorted(
            [f"unix://{SOCKET}", relay.url]
        )
        assert all(s.run(Job(source="print('here')")).stdout == "here\n" for s in sessions)
        assert f"Docker host {relay.url} is back in service" in caplog.text
    finally:
        relay.stop()
