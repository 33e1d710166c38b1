"""A short run of ``benchmarks/openenv_overhead.py`` (one timed GRPO step per mode) so the command cannot rot; the
measured table is the benchmark's: ``python benchmarks/openenv_overhead.py``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_openenv_overhead_benchmark_runs_both_modes(require, capsys, tmp_path):
    require("openenv.core")
    spec = importlib.util.spec_from_file_location("openenv_overhead", ROOT / "benchmarks" / "openenv_overhead.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out_json = tmp_path / "overhead.json"
    args = ["--steps", "1", "--repeats", "1", "--contexts", "1", "--group", "2", "--json", str(out_json)]
    assert bench.main(args) == 0  # 0: no episode failed in either mode
    out = capsys.readouterr().out
    assert "GRPO on OpenEnv triage" in out and "in_process" in out and "server" in out
    rows = json.loads(out_json.read_text())["rows"]
    for mode in ("in_process", "server"):
        row = rows[mode]
        assert row["steps"] == 1 and row["steps_per_s"] > 0 and row["infra_failures"] == 0
        assert row["env_calls_per_step"] == 4  # two episodes, each one reset and one submit_resolution step
        assert 0 < row["rollout_s_per_step"] < row["s_per_step"]
