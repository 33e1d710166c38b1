"""The turn-KL trainers under Lightning's DDP: two CPU processes (gloo) launched by the
real ``propel`` CLI against one process on the same global batch, on scripted agent episodes whose plan decides, step
by step, which rank has turn targets, kept GRPO rows, infrastructure failures or drift rows.

- ``GRPOTurnKLModule`` (EMA teacher, ``scale_rewards: batch``, zero-variance filter): a step where both ranks have
  targets, one where rank 0's episodes all failed at reset (nothing kept, no targets: it joins the all-reduce with
  a zero-weighted row) while rank 1 has GRPO rows and targets, one where GRPO keeps nothing anywhere and only rank 1
  has targets (the turn term alone; rank 0 joins), and one where only rank 1 has targets next to both ranks' GRPO
  rows. The logged losses and the final adapter and EMA weights equal one process's, on both ranks.
- ``TurnKLDistillModule`` (``hint_share`` phasing, ``max_drift`` with rollback): the targets kept by the phasing are
  the global batch's first ones (one step gives rank 1 none), a step whose drift rows are all on rank 1 is rolled
  back on both ranks, and a step where only rank 1 has targets. Same equalities.

Both use plain SGD: Adam's update does not change when a gradient is scaled by a constant, so it would hide a term
normalised by the local instead of the global token count.
- ``scale_rewards: batch``: rewards [0, 1, 0, 1 | 5, 6, 5, 6] split over two ranks, G=2: every rank's advantages are
  +-0.183 (the global std), not +-0.866 (its own).
- Infrastructure failures: a rank whose rollouts all failed (or failed and were filtered) joins the step with a
  placeholder row and the run equals one process; when every rollout of every rank failed, each rank fails with the
  same message and nothing hangs.

- ``configs/grpo/ddp.yaml`` overlaid on ``configs/agent/grpo_distill.yaml`` and ``configs/agent/distill.yaml`` (the
  real ToolEnv episodes in bubblewrap) trains on two ranks.

Every run has a time limit: a rank waiting in a collective its partner never joins fails the test instead of
blocking it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from test_ddp import DDP, max_abs_diff, propel

from propel.losses.advantages import group_advantages
from propel.models.tiny import save_tiny_model

CONFIGS = Path(__file__).resolve().parents[2] / "configs"

TIMEOUT = 300  # seconds per run: a run takes well under a minute; a hang ends here

TURN_KL_KEYS = [
    "train/loss",
    "train/reward/mean",
    "train/kl",
    "train/kept_fraction",
    "train/distill/loss",
    "train/distill/divergence",
    "train/distill/control_divergence",
    "train/distill/targets",
    "train/distill/target_tokens",
    "train/distill/targets_used",
    "train/distill/drift",
    "train/distill/rolled_back",
]

GRPO_PLAN = [["h", "h"], ["b", "h"], ["f", "fh"], ["", "h"]]
"""Per batch, the flags of its two contexts (rank 0 rolls out the first, rank 1 the second); see ``ddp_helpers``."""

DISTILL_PLAN = [["h1", "h1"], ["h1", "h"], ["", "h1"], ["h1", "h1"]]

REWARDS = [0.0, 1.0, 0.0, 1.0, 5.0, 6.0, 5.0, 6.0]
"""The scripted rewards: contexts 0, 1 (rank 0) and 2, 3 (rank 1), two completions each."""


def config(out: Path, model_dir: Path, devices: int, model: dict, plan, contexts: int = 2, max_steps: int = 4):
    callbacks = [
        {
            "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
            "init_args": {"dirpath": str(out / "ckpt"), "every_n_train_steps": 1, "save_last": True, "save_top_k": -1},
        },
        {"class_path": "ddp_helpers.StepRecord", "init_args": {"dirpath": str(out / "record"), "keys": TURN_KL_KEYS}},
    ]
    init = {"model": str(model_dir), "max_new_tokens": 5, "lora": {"r": 4, "alpha": 8}, "micro_batch_size": 3}
    cfg = {
        "seed_everything": 0,
        "trainer": {
            "max_steps": max_steps,
            "accelerator": "cpu",
            "devices": devices,
            **({"strategy": DDP} if devices > 1 else {}),
            "logger": False,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "callbacks": callbacks,
        },
        "model": {"class_path": model["class_path"], "init_args": {**init, **model["init_args"]}},
        "data": {
            "class_path": "propel.datamodules.agent_episodes.EpisodeDataModule",
            "init_args": {
                "env": {"class_path": "ddp_helpers.PlannedEnv"},
                "tasks": {"class_path": "ddp_helpers.PlannedTasks", "init_args": {"plan": plan}},
                "contexts_per_step": contexts,
                "execute_cut_turns": True,  # the tiny model's turns are all cut at max_new_tokens: run them anyway
            },
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"config-{devices}.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def sgd(lr: float) -> dict:
    """Plain SGD: an update proportional to the gradient, so a term normalised wrongly moves the weights differently
    (Adam's update would hide a constant factor)."""
    return {"class_path": "torch.optim.SGD", "init_args": {"lr": lr}}


GRPO_TURN_KL = {
    "class_path": "ddp_helpers.PromptSeededGRPOTurnKL",
    "init_args": {
        "group_size": 2,
        "optimizer": sgd(1.0),
        "loss": {"loss_type": "grpo", "beta": 0.04},
        "scale_rewards": "batch",
        "filter_zero_variance": True,
        "rewards": [{"class_path": "ddp_helpers.PlannedVowels"}],
        "hints": {"class_path": "ddp_helpers.PlannedHints"},
        # kl_coefficient 1: the turn term alone moves the weights by ~7e-3 here (a wrong factor: ~1e-3)
        "turn_kl": {"teacher": "ema", "ema_decay": 0.5, "kl_coefficient": 1.0},
    },
}

DISTILL = {
    "class_path": "ddp_helpers.PromptSeededTurnKLDistill",
    "init_args": {
        "group_size": 2,
        "optimizer": sgd(20.0),  # the tiny model's divergences are ~1e-4: a step that moves the adapter
        "hints": {"class_path": "ddp_helpers.PlannedHints"},
        # kl_coefficient 1: float noise in the divergence scales with it (losses are compared within 1e-6)
        "turn_kl": {"divergence": {"kind": "reverse_kl"}, "kl_coefficient": 1.0},
        "hint_share": [0.5, 1.0],
        "max_drift": 0.0,  # any drift: a step with drift rows anywhere is rolled back everywhere
        "rollback": True,
    },
}


def run_both(tmp: Path, model_dir: Path, model: dict, plan) -> dict[int, Path]:
    runs = {}
    for devices in (1, 2):
        out = tmp / f"devices-{devices}"
        proc = propel("fit", "-c", str(config(out, model_dir, devices, model, plan)), timeout=TIMEOUT)
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[devices] = out
    return runs


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "record" / "metrics.jsonl").read_text().splitlines()]


def weights(out: Path, rank: int = 0) -> dict:
    return torch.load(out / "record" / f"lora-rank{rank}.pt", weights_only=False)


def assert_equal_runs(runs: dict[int, Path]) -> list[dict]:
    """Per-step metrics of the 2-rank run equal the one-process run's (losses within 1e-6); both ranks end with the
    one-process adapter (and EMA) weights within 1e-5. Returns the one-process metrics."""
    one, two = metrics(runs[1]), metrics(runs[2])
    assert [r["step"] for r in one] == [r["step"] for r in two] and one
    for want, got in zip(one, two, strict=True):
        assert want.keys() == got.keys(), (want.keys(), got.keys())
        for key in want:
            tol = {"abs": 1e-6} if key == "train/loss" else {"rel": 1e-5, "abs": 1e-6}
            assert got[key] == pytest.approx(want[key], **tol), (want["step"], key)
    single = weights(runs[1])
    for rank in (0, 1):
        ddp = weights(runs[2], rank)
        assert max_abs_diff(single["lora"], ddp["lora"]) < 1e-5, rank
        if single["ema"] is not None:
            assert max_abs_diff(single["ema"], ddp["ema"]) < 1e-5, rank
    start = checkpoint(runs[1], 1)
    assert max_abs_diff({f"policy.{k}": v for k, v in single["lora"].items()}, start) > 1e-2  # not vacuous
    return one


def checkpoint(out: Path, step: int) -> dict:
    return torch.load(out / "ckpt" / f"epoch=0-step={step}.ckpt", weights_only=False)["state_dict"]


def test_grpo_turn_kl_on_two_ranks_equals_one_process(tmp_path, tiny_model_dir):
    runs = run_both(tmp_path, tiny_model_dir, GRPO_TURN_KL, GRPO_PLAN)
    one = assert_equal_runs(runs)
    assert [r["step"] for r in one] == [1, 2, 3, 4]  # every batch took one optimizer step
    assert [r["train/distill/targets"] for r in one] == [4.0, 2.0, 2.0, 2.0]
    assert [r["train/kept_fraction"] for r in one] == [1.0, 0.5, 0.0, 1.0]  # batch 2: GRPO kept nothing
    assert all(r["train/distill/divergence"] > 0 for r in one)


def test_turn_kl_distillation_on_two_ranks_equals_one_process(tmp_path, tiny_model_dir):
    runs = run_both(tmp_path, tiny_model_dir, DISTILL, DISTILL_PLAN)
    one = assert_equal_runs(runs)
    assert [r["train/distill/targets_used"] for r in one] == [2.0, 3.0, 2.0, 4.0]  # ceil(share x global targets)
    assert one[1]["train/distill/rolled_back"] == 1.0  # batch 1's drift rows are all rank 1's
    for out in runs.values():  # step 2 was undone (on rank 0 too: the 2-rank checkpoint is rank 0's), the others not
        steps = [checkpoint(out, k) for k in (1, 2, 3, 4)]
        assert max_abs_diff(steps[0], steps[1]) == 0.0
        assert max_abs_diff(steps[1], steps[2]) > 1e-3 and max_abs_diff(steps[2], steps[3]) > 1e-3


def test_batch_scaled_advantages_use_the_global_std(tmp_path, tiny_model_dir):
    model = {
        "class_path": "ddp_helpers.AdvantageRecord",
        "init_args": {
            "advantages_dir": str(tmp_path / "advantages"),
            "group_size": 2,
            "scale_rewards": "batch",
            "rewards": [{"class_path": "ddp_helpers.ListedRewards", "init_args": {"values": REWARDS, "group_size": 2}}],
        },
    }
    path = config(tmp_path / "run", tiny_model_dir, 2, model, [["", "", "", ""]], contexts=4, max_steps=1)
    proc = propel("fit", "-c", str(path), timeout=TIMEOUT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    want = group_advantages(torch.tensor(REWARDS), 2, scale="batch")
    assert want.abs().max() == pytest.approx(0.5 / math.sqrt(52 / 7), rel=1e-3)  # 0.183
    ranks = [json.loads((tmp_path / "advantages" / f"rank{r}.jsonl").read_text().splitlines()[0]) for r in (0, 1)]
    torch.testing.assert_close(torch.tensor(ranks[0] + ranks[1]), want)


FAILURE_PLAN = [["b", "f", "", ""], ["b", "b", "", ""], ["b", "b", "b", "b"]]
"""Batch 0: rank 0's first context failed at reset (no token ids) and its other is flat, so it keeps nothing; batch 1:
all of rank 0's rollouts failed; batch 2: every rollout of every rank failed."""


def test_infrastructure_failures_on_one_rank_and_on_every_rank(tmp_path, tiny_model_dir):
    """A rank whose rollouts all failed or were all filtered joins the step with a placeholder row
    (not an infrastructure failure's empty ids) and the 2-rank run equals one process; a step whose rollouts failed on
    every rank stops every rank with the same message (no rank left waiting)."""
    model = {
        "class_path": "ddp_helpers.PromptSeededGRPO",
        "init_args": {"group_size": 2, "optimizer": sgd(1.0), "filter_zero_variance": True,
                      "rewards": [{"class_path": "ddp_helpers.PlannedVowels"}]},
    }  # fmt: skip
    runs = {}
    for devices in (1, 2):
        out = tmp_path / f"devices-{devices}"
        proc = propel(
            "fit", "-c", str(config(out, tiny_model_dir, devices, model, FAILURE_PLAN, 4, 4)), timeout=TIMEOUT
        )
        errors = [runtime_errors(proc.stderr, f"[rank{r}]: " if devices > 1 else "") for r in range(devices)]
        assert proc.returncode != 0 and all(errors), proc.stderr[-3000:]
        where = " on all 2 ranks" if devices > 1 else ""
        first = "environment raised OSError: the sandbox went away"
        want = f"every rollout of step 2 failed outside the policy{where}; first: {first}"
        assert all(e[-1] == want for e in errors), errors  # every rank, the same words
        runs[devices] = out
    for step in (1, 2):  # the steps before: equal to one process
        assert max_abs_diff(checkpoint(runs[1], step), checkpoint(runs[2], step)) < 1e-5
    assert max_abs_diff(checkpoint(runs[1], 1), checkpoint(runs[1], 2)) > 1e-3


def runtime_errors(stderr: str, prefix: str) -> list[str]:
    """The messages of the ``RuntimeError``s in ``stderr`` whose lines start with ``prefix`` (a rank's)."""
    head = prefix + "RuntimeError: "
    return [line[len(head) :] for line in stderr.splitlines() if line.startswith(head)]


@pytest.mark.parametrize("name", ["grpo_distill", "distill"])
def test_the_agent_configs_with_the_ddp_overlay_train_on_two_ranks(tmp_path, name):
    """``propel fit -c configs/grpo/base.yaml -c configs/agent/<name>.yaml -c configs/grpo/ddp.yaml`` on two CPU
    ranks (a tiny model, two steps): it trains instead of hanging or refusing."""
    model = save_tiny_model(tmp_path / "tiny")
    args = ["-c", str(CONFIGS / "grpo" / "base.yaml"), "-c", str(CONFIGS / "agent" / f"{name}.yaml")]
    args += ["-c", str(CONFIGS / "grpo" / "ddp.yaml")]
    args += ["--trainer.accelerator=cpu", "--trainer.devices=2", "--trainer.max_steps=2", "--trainer.logger=false"]
    args += [f"--model.init_args.model={model}", "--model.init_args.max_new_tokens=8"]
    proc = propel("fit", *args, timeout=TIMEOUT, cwd=tmp_path)  # the configs write under runs/ in the cwd
    assert proc.returncode == 0, proc.stderr[-3000:]
    ckpt = torch.load(tmp_path / "runs" / name / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["global_step"] == 2 and ckpt["state_dict"]
