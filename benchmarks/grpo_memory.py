"""Peak memory and step time of the demo's GRPO stage per memory setting, each setting in its own process.

The demo's GRPO run (``configs/grpo/base.yaml`` + ``configs/math/grpo.yaml``: the bundled model in fp32, LoRA,
2 contexts x G=8, 64 new tokens, the same seed) for ``--steps`` steps under each variant of the two settings that
decide what the update keeps alive: ``micro_batch_size`` (rows per forward/backward; 16 = the whole step at once)
and ``gradient_checkpointing`` (each layer's activations recomputed in backward: the same loss and gradients).
Every variant is a ``propel fit`` process of its own, so its peak resident set is its own: the child's
``ru_maxrss``, what ``/usr/bin/time -v`` reports as "Maximum resident set size". Times are means over the steps
after the first (the first pays for warm-up): the update (``train/time/training_s``: forward, backward and optimizer
step over the micro-batches, what the two settings change) and the rollout (``train/time/wall_s``: generation and
scoring, which they leave alone). Same seed, same contexts and the
same sampling in every variant: the rows each update sees are the same, so the variants differ only in how the
update is computed; that neither setting changes the loss or its gradients is tested
(``tests/losses/test_losses_policy.py::test_micro_batches_sum_to_full_batch_gradient``,
``tests/models/test_checkpointing.py``). The table's mean loss (GRPO's on-policy loss is about 0) shows the runs
agree to float noise.

The reward is the validity gate (``ValidityReward``): the demo's probe reward needs the probe stage's artifact
(``--probe PATH`` uses one, e.g. ``runs/demo/probe/artifact``); its no-grad reference forward is not what peaks.

    python benchmarks/grpo_memory.py                       # 4 variants x 3 steps: about 8 min on 2 idle cores
    python benchmarks/grpo_memory.py --variants 16:off 8:on --steps 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml
from rich.console import Console
from rich.table import Table

from propel.pipeline.stages import csv_metrics, csv_trainer_overlay

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VARIANTS = ("16:off", "16:on", "4:off", "8:on")
"""``micro_batch_size:gradient_checkpointing``; the first is the demo's setting before this benchmark."""


def parse_variant(text: str) -> tuple[int, bool]:
    size, _, ckpt = text.partition(":")
    if not size.isdigit() or int(size) < 1 or ckpt not in ("on", "off"):
        raise argparse.ArgumentTypeError(f"a variant is MICRO_BATCH:on|off (e.g. 8:on), got {text!r}")
    return int(size), ckpt == "on"


def overlay(
    root: Path,
    steps: int,
    micro_batch_size: int,
    checkpointing: bool,
    probe: str | None,
    contexts: int = 2,
    model: str | None = None,
) -> dict:
    reward = (
        {"class_path": "propel.rewards.probe_reward.ProbeReward", "init_args": {"artifact": probe}}
        if probe
        else {"class_path": "propel.rewards.ValidityReward"}
    )
    return {
        "trainer": csv_trainer_overlay(root, steps),
        "model": {
            "init_args": {
                "micro_batch_size": micro_batch_size,
                "gradient_checkpointing": checkpointing,
                "rewards": [reward],
                **({"model": model} if model else {}),
            }
        },
        "data": {"init_args": {"contexts_per_step": contexts}},
    }


def run_variant(root: Path, settings: dict) -> dict:
    """One ``propel fit`` child on ``settings`` (an ``overlay``): its peak RSS (MiB), mean step time after the first,
    mean loss, wall time."""
    root.mkdir(parents=True)
    path = root / "overlay.yaml"
    path.write_text(yaml.safe_dump(settings, sort_keys=False))
    micro_batch_size = settings["model"]["init_args"]["micro_batch_size"]
    checkpointing = settings["model"]["init_args"]["gradient_checkpointing"]
    cmd = [
        sys.executable,
        "-m",
        "propel.cli",
        "fit",
        "-c",
        str(ROOT / "configs/grpo/base.yaml"),
        "-c",
        str(ROOT / "configs/math/grpo.yaml"),
        "-c",
        str(path),
    ]
    t0 = time.monotonic()
    with (root / "log.txt").open("w") as log:
        child = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, "WANDB_MODE": "offline"}
        )
        _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        tail = (root / "log.txt").read_text().strip().splitlines()[-5:]
        raise SystemExit(f"variant {micro_batch_size}:{'on' if checkpointing else 'off'} failed:\n" + "\n".join(tail))
    metrics = csv_metrics(root)
    update_s, rollout_s, losses = (
        [v for v in metrics.get(key, []) if v == v]  # a step that did not log the key is NaN there
        for key in ("train/time/training_s", "train/time/wall_s", "train/loss")
    )
    return {
        "micro_batch_size": micro_batch_size,
        "gradient_checkpointing": checkpointing,
        "peak_rss_mib": usage.ru_maxrss / 1024,  # Linux reports KiB
        "update_s": _after_first(update_s),
        "rollout_s": _after_first(rollout_s),
        "update_s_each": update_s,
        "mean_loss": sum(losses) / len(losses) if losses else None,
        "process_s": wall,
    }


def _after_first(values: list[float]) -> float | None:
    later = values[1:] or values
    return sum(later) / len(later) if later else None


def main(argv=None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", nargs="+", type=parse_variant, default=[parse_variant(v) for v in DEFAULT_VARIANTS])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--probe", default=None, help="a probe artifact: the demo's probe reward instead of the gate")
    p.add_argument("--json", type=Path, default=None, help="also write the results here")
    p.add_argument("--keep", default=None, help="keep the runs' folders here (default: a temporary folder)")
    p.add_argument("--contexts-per-step", type=int, default=2, help="prompts per step (G=8 answers each)")
    p.add_argument("--model", default=None, help="another model than the demo's (a folder); the smoke test's tiny one")
    a = p.parse_args(argv)
    work = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="grpo_memory-"))
    results = []
    try:
        for k, (size, ckpt) in enumerate(a.variants):
            name = f"{k}-{size}-{'on' if ckpt else 'off'}"
            settings = overlay(work / name, a.steps, size, ckpt, a.probe, a.contexts_per_step, a.model)
            results.append(run_variant(work / name, settings))
            print(json.dumps(results[-1]), flush=True)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
    title = f"The demo's GRPO stage ({a.contexts_per_step} contexts x G=8, 64 new tokens, fp32), {a.steps} steps each"
    table = Table(title=title)
    cols = ("micro-batch", "activation checkpointing", "peak RSS MiB", "update s/step", "rollout s/step", "mean loss")
    for col in cols:
        table.add_column(col, justify="right")
    base = results[0]["peak_rss_mib"]
    for r in results:
        table.add_row(
            str(r["micro_batch_size"]),
            "on" if r["gradient_checkpointing"] else "off",
            f"{r['peak_rss_mib']:.0f} ({r['peak_rss_mib'] / base:.2f}x)",
            "n/a" if r["update_s"] is None else f"{r['update_s']:.1f}",
            "n/a" if r["rollout_s"] is None else f"{r['rollout_s']:.1f}",
            "n/a" if r["mean_loss"] is None else f"{r['mean_loss']:+.2e}",
        )
    Console(width=160).print(table)
    print(f"load average (1 min) at the end: {os.getloadavg()[0]:.2f}")
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return results


if __name__ == "__main__":
    main()
