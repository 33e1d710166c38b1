"""``benchmarks/prefix_sharing.py`` on the tiny model: both settings timed every repeat, the same gradients."""

from __future__ import annotations


def test_both_settings_are_timed_and_give_the_same_gradients(benchmark_module, tiny_model_dir, capsys):
    bench = benchmark_module("prefix_sharing")
    out = bench.main(["--model", str(tiny_model_dir), "--prompt", "12", "--completion", "6", "--repeats", "2"])
    for kind in ("train", "score"):
        timed = out["repeats"][kind]
        assert len(timed["plain_s"]) == len(timed["shared_s"]) == 2 and min(timed["plain_s"] + timed["shared_s"]) > 0
    assert out["relative_grad_diff"] < 1e-4
    assert "shared / plain" in capsys.readouterr().out
