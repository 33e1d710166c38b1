"""The experiment drivers as modules (they live in ``experiments/<question>/``, outside the package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def experiment_module():
    """``experiment_module("propel_decisive/run")``: ``experiments/propel_decisive/run.py`` imported as a module."""

    def load(name: str):
        path = ROOT / "experiments" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name.replace("/", "_"), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
