"""The reaper of dead processes' sandbox containers, racing another reaper: a container another process has already
removed (404) or is removing (409, "removal ... already in progress") is skipped, not an error; any other engine
error still surfaces. The engine's answers are replayed (a real race cannot be staged on demand); the real-Docker
path is ``test_sandbox_docker.test_pool_containers_of_a_killed_process_are_cleaned_up``."""

from __future__ import annotations

import socket

import pytest
import requests
from docker.errors import APIError, NotFound

from propel.sandbox.docker_containers import LABEL, reap_stale_containers


def _dead_pid() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _error(cls, status: int):
    response = requests.Response()
    response.status_code = status
    return cls(f"{status}", response=response)


class _Engine:
    """``client.api`` answering ``containers`` with one dead owner's containers and ``remove_container`` with the
    given outcome per id."""

    def __init__(self, outcomes: dict[str, Exception | None]):
        self.outcomes = outcomes
        pid = str(_dead_pid())
        labels = {LABEL: "worker", f"{LABEL}.host": socket.gethostname(), f"{LABEL}.host_pid": pid}
        self.listed = [{"Id": cid, "Labels": labels} for cid in outcomes]
        self.api = self

    def containers(self, all: bool, filters: dict):  # noqa: A002 - docker's keyword
        return self.listed

    def remove_container(self, cid: str, force: bool):
        if self.outcomes[cid] is not None:
            raise self.outcomes[cid]


def test_containers_another_reaper_removed_or_is_removing_are_skipped():
    engine = _Engine({"gone": _error(NotFound, 404), "in_progress": _error(APIError, 409), "ours": None})
    assert reap_stale_containers(engine) == 1


def test_another_engine_error_is_not_swallowed():
    with pytest.raises(APIError):
        reap_stale_containers(_Engine({"broken": _error(APIError, 500)}))
