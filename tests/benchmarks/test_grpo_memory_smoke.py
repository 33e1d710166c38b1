"""``benchmarks/grpo_memory.py``: a variant is parsed or refused with the expected form, its overlay composes with the
demo's configs into the settings it names (the CLI's own parser, seconds), and one real one-step run of the demo's
GRPO stage (on the tiny model) reports its own peak RSS, update and rollout times and loss. The measured table is in
``docs/benchmarks.md``."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest
import yaml


def test_variants_parse_or_are_refused(benchmark_module):
    exp = benchmark_module("grpo_memory")
    assert exp.parse_variant("8:on") == (8, True) and exp.parse_variant("16:off") == (16, False)
    for bad in ("8", "0:on", "x:off", "8:yes"):
        with pytest.raises(argparse.ArgumentTypeError, match="MICRO_BATCH"):
            exp.parse_variant(bad)


def test_the_overlay_sets_what_the_variant_names_on_the_demo_config(benchmark_module, tmp_path):
    exp = benchmark_module("grpo_memory")
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(exp.overlay(tmp_path, 2, 4, True, None)))
    out = subprocess.run(
        [sys.executable, "-m", "propel.cli", "fit", "-c", "configs/grpo/base.yaml", "-c", "configs/math/grpo.yaml"]
        + ["-c", str(path), "--print_config"],
        capture_output=True,
        text=True,
        cwd=exp.ROOT,
        check=True,
    )
    config = yaml.safe_load(out.stdout)
    init = config["model"]["init_args"]
    assert (init["micro_batch_size"], init["gradient_checkpointing"], init["group_size"]) == (4, True, 8)
    assert init["max_new_tokens"] == 64 and config["trainer"]["max_steps"] == 2
    assert config["data"]["init_args"]["contexts_per_step"] == 2
    assert [r["class_path"] for r in init["rewards"]] == ["propel.rewards.ValidityReward"]


def test_one_step_reports_its_peak_rss_and_loss(benchmark_module, tmp_path, tiny_model_dir):
    """The demo's GRPO stage as the benchmark runs it, on the tiny model (the real one's table is the benchmark's)."""
    exp = benchmark_module("grpo_memory")
    (r,) = exp.main(
        ["--variants", "8:off", "--steps", "1", "--contexts-per-step", "1", "--keep", str(tmp_path / "runs")]
        + ["--model", str(tiny_model_dir)]
    )
    overlay = yaml.safe_load((tmp_path / "runs" / "0-8-off" / "overlay.yaml").read_text())
    assert overlay["data"]["init_args"]["contexts_per_step"] == 1  # 8 answers: the step's shape, at half the demo's
    assert overlay["model"]["init_args"]["model"] == str(tiny_model_dir)
    assert 300 < r["peak_rss_mib"] < 24_000  # a real process that loaded the model, not this one's
    assert r["update_s"] > 0 and r["rollout_s"] > 0 and r["mean_loss"] is not None and len(r["update_s_each"]) == 1
