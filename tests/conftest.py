"""Shared fixtures: the bundled tokenizer, a tiny random model folder, the real bundled model, and optional test
dependencies (TRL, NLTK, bubblewrap, Docker) that skip locally but fail under CI=true: CI must run every test."""

from __future__ import annotations

import importlib
import os
import sys

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def usable_cores() -> int:
    """The cores this process may run on (a container or taskset limits them below ``os.cpu_count()``)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _share_the_cores_between_xdist_workers() -> None:
    """Give each xdist worker (and the processes its tests start) its share of the cores, not all of them: with 2
    workers on 2 cores each torch ran 2 OpenMP threads, 4 busy threads on 2 cores, and heavy tests side by side ran
    2-4x slower than alone (four heavy test files: 366 s with the default, 190 s with one thread each, 2026-11-29)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if workers < 2:
        return
    threads = str(max(1, usable_cores() // workers))
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(name, threads)
    if "torch" in sys.modules:  # a plugin imported it before this file: its pool is already sized
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


_share_the_cores_between_xdist_workers()


@pytest.fixture(scope="session", name="usable_cores")
def usable_cores_fixture() -> int:
    """The cores this process may run on, as a fixture: a test's ``from conftest import`` can meet another folder's
    conftest.py, which is what CI's worker met (stop 65)."""
    return usable_cores()


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def missing_dependency(reason: str) -> None:
    """Skip the calling test for a dependency absent here, or fail it under CI=true (where it must be installed)."""
    if in_ci():
        pytest.fail(f"missing test dependency under CI=true (install it; CI runs every test): {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def missing():
    """``missing(reason)``: skip this test locally, fail it under CI=true (``missing_dependency``)."""
    return missing_dependency


@pytest.fixture(scope="session")
def require():
    """``require("trl.trainer.utils")``: import an optional test dependency, or ``missing(...)`` without it. Use it
    in the tests that need the module, so the rest of their file runs whether it is installed or not."""

    def load(name: str):
        try:
            return importlib.import_module(name)
        except ImportError as err:
            missing_dependency(f"{name} is not importable ({err}); `pip install -e .[dev]` installs it")

    return load


@pytest.fixture(scope="session")
def docker_sandbox_or_skip():
    """Builds a DockerSandbox(**kwargs), or skips locally / fails in CI (CI=true) when no engine or image is there."""

    def make(**kwargs):
        from propel.sandbox import SandboxError
        from propel.sandbox.docker import DockerSandbox

        try:
            return DockerSandbox(**kwargs)
        except SandboxError as e:
            missing_dependency(f"no docker engine/image here: {e}")

    return make


@pytest.fixture(scope="session")
def bundled_dir():
    """Folder of the converted bundled SmolLM2-135M-Instruct (converted once per cache)."""
    from propel.models import bundled_model_dir

    return bundled_model_dir("smollm2-135m-instruct")


@pytest.fixture(scope="session")
def tokenizer(bundled_dir):
    from propel.models import load_tokenizer

    return load_tokenizer(str(bundled_dir))


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, bundled_dir):
    """A tiny random Llama with the bundled tokenizer, saved as a folder (loads in well under a second)."""
    from propel.models.tiny import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny") / "model", base=str(bundled_dir))


@pytest.fixture()
def tiny_model(tiny_model_dir):
    from propel.models import load_model

    return load_model(str(tiny_model_dir))


@pytest.fixture(scope="session")
def real_model(bundled_dir):
    """The real bundled model, loaded once per session (treat as read-only)."""
    from propel.models import load_model

    return load_model(str(bundled_dir))
