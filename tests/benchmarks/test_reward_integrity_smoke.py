"""A seconds-long run of ``benchmarks/reward_integrity.py`` so the command cannot rot (the full table is the
benchmark's: ``python benchmarks/reward_integrity.py --backends local docker``)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_reward_integrity_benchmark_runs_and_meets_its_targets(capsys):
    spec = importlib.util.spec_from_file_location("reward_integrity", ROOT / "benchmarks" / "reward_integrity.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    args = ["--backends", "local", "--sweep-tasks", "1", "--solutions", "2", "--canonical", "4", "--no-swe"]
    assert bench.main(args) == 0
    out = capsys.readouterr().out
    assert "Test-suite reward integrity" in out and "rewards/s" in out
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    rows = [cells for cells in rows if cells and cells[0] in ("value", "pytest")]
    assert len(rows) == 4  # integrity and throughput rows of both graders
    for cells in rows[:2]:
        assert cells[3] == "0" and cells[4] == "0" and cells[6] == "0" and cells[-1] == "0.000", cells
