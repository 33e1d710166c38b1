"""``benchmarks/update_row_memory.py``: each setting runs in its own process on the tiny model and reports its own
peak resident set, which is never below the resident set before the micro-batch. The measured table (the bundled
model at agent-episode lengths) is in the Makefile's comment on the agent demos."""

from __future__ import annotations


def test_each_setting_reports_its_own_peak(benchmark_module, tiny_model_dir, capsys):
    exp = benchmark_module("update_row_memory")
    rows = exp.main(["--model", str(tiny_model_dir), "--rows", "2", "--tokens", "24", "--span", "8"])
    assert [(r["rows"], r["checkpointing"]) for r in rows] == [(2, False), (2, True)]
    assert all(r["peak_kb"] >= r["before_kb"] > 0 for r in rows)
    assert capsys.readouterr().out.count("\n") == 3  # the header and one line per setting
