"""The suite's xdist workers share the cores instead of each running torch on all of them (tests/conftest.py)."""

from __future__ import annotations

import os

import torch


def test_each_xdist_worker_runs_torch_on_its_share_of_the_cores(usable_cores: int):
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers < 2:  # one process: it keeps torch's default, all the cores
        assert "PYTEST_XDIST_WORKER" not in os.environ
        return
    threads = int(os.environ["OMP_NUM_THREADS"])  # what the tests' subprocesses inherit; a value set outside is kept
    assert torch.get_num_threads() == threads
    assert threads * workers <= max(usable_cores, workers)  # together the workers ask for no more threads than cores
