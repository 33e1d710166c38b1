"""Shared fixtures: the bundled tokenizer, a tiny random model folder, the real bundled model, and optional test
dependencies (TRL, NLTK, bubblewrap, Docker) that skip locally but fail under CI=true: CI must run every test."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


FILE_SECONDS = Path(__file__).parent / "file_seconds.json"
"""Each test file's seconds (setup, call and teardown of its tests) measured on a whole run of the suite."""


def pytest_addoption(parser):
    parser.addoption(
        "--store-file-seconds",
        action="store_true",
        help=f"write each test file's measured seconds to {FILE_SECONDS.name} (the order later runs start files in)",
    )


def pytest_collection_modifyitems(config, items):
    """Longest files first, by their measured seconds (files not measured keep their place after them). Two workers
    take one file at a time (``--dist loadfile --no-loadscope-reorder``): started early, the 2-3 minute files
    overlap the many short ones instead of one worker starting a long one as the other runs out of work."""
    seconds = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.exists() else {}
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::")[0], 0.0))  # stable: a file's order is kept


class _FileSeconds:
    """Sums each file's test durations on the process that reports them all (the controller under xdist)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    def pytest_runtest_logreport(self, report) -> None:
        path = report.nodeid.split("::")[0]
        self.seconds[path] = self.seconds.get(path, 0.0) + report.duration

    def pytest_sessionfinish(self, session) -> None:
        record = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.exists() else {}
        record.update({k: round(v, 1) for k, v in self.seconds.items()})  # files this run did not run keep theirs
        ranked = dict(sorted(record.items(), key=lambda kv: -kv[1]))
        FILE_SECONDS.write_text(json.dumps(ranked, indent=0) + "\n")


def pytest_configure(config):
    if config.getoption("--store-file-seconds") and not hasattr(config, "workerinput"):  # not on an xdist worker
        config.pluginmanager.register(_FileSeconds(), "propel-file-seconds")


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
