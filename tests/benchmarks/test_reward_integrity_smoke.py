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
    args = ["--backends", "local", "--sweep-tasks", "1", "--solutions", "2", "--canonical", "4"]
    assert bench.main([*args, "--graders", "value", "swe", "agent"]) == 0
    out = capsys.readouterr().out
    assert "Reward integrity" in out and "rewards/s" in out and "s/repair" in out and "s/verdict" in out
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines() if line.startswith("│")]
    integrity = [cells for cells in rows if len(cells) == 6 and cells[0] in ("value", "swe", "agent")]
    assert [cells[0] for cells in integrity] == ["value", "swe", "agent"]
    for cells in integrity:
        assert int(cells[2]) > 0 and cells[3] == "0" and int(cells[4]) > 0 and cells[5] == "0", cells
