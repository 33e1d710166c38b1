"""The benchmark scripts as modules (they live in ``benchmarks/``, outside the package)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def benchmark_module():
    """``experiment_module("grpo_vs_trl/run")``: ``experiments/grpo_vs_trl/run.py`` imported as a module."""

    def load(name: str):
        spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
