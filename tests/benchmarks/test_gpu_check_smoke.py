"""``benchmarks/gpu_check.py`` (``make gpu-check``) and the memory column of ``benchmarks/grpo_step.py`` on CPU: every
part runs on a tiny model (FSDP skipped, with the reason), both files are written, and without a GPU the default
run stops with one line. The measured table is the GPU machine's: docs/gpu.md."""

from __future__ import annotations

import json

import pytest
import torch

TINY = ["--steps", "1", "--prompts", "1", "--group", "2", "--new-tokens", "4"]


def test_gpu_check_without_a_gpu_says_so_in_one_line(benchmark_module, monkeypatch, tmp_path, capsys):
    check = benchmark_module("gpu_check")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as stop:
        check.main(["--out", str(tmp_path)])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.startswith("gpu-check: no CUDA GPU") and "docs/gpu.md" in err
    assert not list(tmp_path.iterdir())  # nothing half-written


@pytest.mark.timeout(900)
def test_gpu_check_parts_run_on_cpu(benchmark_module, require, tiny_model_dir, tmp_path, capsys):
    require("trl")
    check = benchmark_module("gpu_check")
    report = check.main(["--device", "cpu", "--model", str(tiny_model_dir), *TINY, "--out", str(tmp_path)])
    results = report["results"]
    for part in ("grpo_hf_bf16", "trl_grpo", "turn_kl", "probe_extraction", "generation"):
        assert results[part]["status"] == "ran", (part, results[part].get("traceback"))
        assert results[part]["s_per_step"] > 0 and results[part]["peak_rss_mib"] > 0
    assert results["trl_grpo"]["propel_over_trl"] > 0
    variants = results["generation"]["variant_details"]
    names = {"engine", "engine_merged", "engine_no_autocast", "engine_static", "plain_generate", "plain_static"}
    assert set(variants) == names and set(results["generation"]["variants"]) == names, variants  # none failed
    assert all(v["s_per_call"] > 0 and v["tokens_per_s"] > 0 and v["first_call_s"] > 0 for v in variants.values())
    assert results["fsdp"]["status"] == "skipped" and "requires a GPU" in results["fsdp"]["reason"]
    memory = results["memory"]  # the estimate is computed, the comparison needs a GPU
    assert memory["status"] == "skipped" and memory["estimate_mib"] > 0 and memory["prompt_tokens"] > 0
    assert json.loads((tmp_path / "gpu_check.json").read_text())["results"].keys() == set(check.PARTS)
    table = (tmp_path / "gpu_check.md").read_text()
    assert "| fsdp | skipped |" in table and "propel / TRL = " in table and "| turn_kl | ran |" in table
    assert "plain_static" in table and "tok/s" in table


@pytest.mark.timeout(600)
def test_grpo_step_reports_peak_memory_and_ratio_to_trl(benchmark_module, require, tiny_model_dir, tmp_path, capsys):
    require("trl")
    bench = benchmark_module("grpo_step")
    out = tmp_path / "grpo_step.json"
    results = bench.main(["--model", str(tiny_model_dir), *TINY, "--json", str(out)])
    assert len(results) == 2
    for row in results.values():
        assert row["steps"] == 1 and row["peak_rss_mib"] > 100 and row["peak_gpu_mib"] is None
    saved = json.loads(out.read_text())
    assert list(saved["ratio_to_trl"]) == ["propel (hf engine)"] and saved["ratio_to_trl"]["propel (hf engine)"] > 0
    printed = capsys.readouterr().out
    assert "peak RSS MiB" in printed and "/ TRL = " in printed
