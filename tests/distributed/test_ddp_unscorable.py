"""Data-parallel GRPO with rewards that cannot judge every sample: two CPU ranks (gloo, launched by the real
``propel`` CLI) against one process on the same global batch. The unscorable rate, the skipped groups, each
component's share of the advantage variance, the loss and the final adapter agree, and ``reward_components.csv`` is
written once, by rank 0, with the one-process run's rows."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from test_ddp import DDP, lora, max_abs_diff, propel, records

KEYS = [
    "train/loss",
    "train/reward/mean",
    "train/rewards/unscorable_rate",
    "train/rewards/skipped_groups",
    "train/reward/vowels/adv_share",
    "train/reward/length/adv_share",
    "train/reward/vowels/unscored",
]


def config(out: Path, model_dir: Path, devices: int) -> Path:
    callbacks = [
        {
            "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
            "init_args": {"dirpath": str(out / "ckpt"), "save_last": True, "save_top_k": 0},
        },
        {"class_path": "ddp_helpers.StepRecord", "init_args": {"dirpath": str(out / "record"), "keys": KEYS}},
        {"class_path": "propel.callbacks.reward_components.RewardComponentMonitor", "init_args": {"window": 2}},
    ]
    cfg = {
        "seed_everything": 0,
        "trainer": {
            "max_steps": 4, "accelerator": "cpu", "devices": devices, **({"strategy": DDP} if devices > 1 else {}),
            "logger": False, "enable_progress_bar": False, "enable_model_summary": False, "callbacks": callbacks,
            "default_root_dir": str(out / "run"),
        },
        "model": {
            "class_path": "ddp_helpers.PromptSeededGRPO",
            "init_args": {
                "model": str(model_dir), "group_size": 4, "max_new_tokens": 6, "lr": 1e-2, "micro_batch_size": 3,
                "share_prompt": False,  # a shared prompt groups rows per rank differently: float rounding, not DDP's
                "lora": {"r": 4, "alpha": 8}, "loss": {"loss_type": "dapo", "beta": 0.04},
                "rewards": [
                    {"class_path": "ddp_helpers.Patchy", "init_args": {"name": "vowels"}},
                    {"class_path": "ddp_helpers.Patchy",
                     "init_args": {"name": "length", "measure": "length", "weight": 0.5, "partial": True}},
                ],
            },
        },
        "data": {
            "class_path": "propel.datamodules.contexts.ContextDataModule",
            "init_args": {"domain": {"class_path": "propel.domains.MathExpressionDomain"}, "contexts_per_step": 4},
        },
    }  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"grpo-{devices}.yaml"
    path.write_text(json.dumps(cfg))
    return path


def test_two_ranks_count_and_leave_out_the_unscorable_as_one_process_does(tmp_path, tiny_model_dir):
    runs = {}
    for devices in (1, 2):
        out = tmp_path / f"devices-{devices}"
        proc = propel("fit", "-c", str(config(out, tiny_model_dir, devices)))
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[devices] = out
    one, two = records(runs[1], "metrics.jsonl"), records(runs[2], "metrics.jsonl")
    assert [r["step"] for r in one] == [r["step"] for r in two] == [1, 2, 3, 4]
    for want, got in zip(one, two, strict=True):
        assert set(KEYS) <= want.keys() and want.keys() == got.keys()
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-5), key
    assert sum(r["train/rewards/skipped_groups"] for r in one) >= 1  # not vacuous: groups were skipped ...
    assert any(r["train/rewards/unscorable_rate"] > 0 for r in one)  # ... and samples left out
    assert all(
        r["train/reward/vowels/adv_share"] + r["train/reward/length/adv_share"] == pytest.approx(1.0) for r in one
    )
    assert max_abs_diff(lora(runs[1]), lora(runs[2])) < 5e-5
    rows = {d: list(csv.DictReader((runs[d] / "run" / "reward_components.csv").open())) for d in (1, 2)}
    assert len(rows[1]) == len(rows[2]) == 4  # one row per step: rank 1 wrote nothing
    for want, got in zip(rows[1], rows[2], strict=True):
        assert want.keys() == got.keys() and want["step"] == got["step"]
        assert {k: float(v) for k, v in got.items()} == pytest.approx({k: float(v) for k, v in want.items()}, abs=1e-5)
