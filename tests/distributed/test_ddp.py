"""Data-parallel GRPO and labeling through Lightning's DDP strategy: two CPU processes (gloo) launched by the real
``propel`` CLI, as a user launches them, against one process on the same global batch.

- GRPO, 2 ranks vs 1: each rank rolls out whole groups of its half of every step's contexts, the two halves are the
  one-process batch, and the logged losses and reward statistics and the final LoRA weights match.
- A 2-rank run SIGKILLed in the middle of a step and resumed with ``--ckpt_path last`` ends with the adapter and
  the per-step numbers of the uninterrupted 2-rank run.
- Labeling (``propel predict``) with 2 ranks writes the same pool rows as 1 rank, from parts of both ranks, and
  its summary counts every rank's rows.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from propel.pools import read_pool

HERE = Path(__file__).resolve().parent
TESTS = HERE.parent
DDP = {"class_path": "lightning.pytorch.strategies.DDPStrategy", "init_args": {"process_group_backend": "gloo"}}


def propel(*args: str, timeout: float = 400, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m propel.cli ARGS`` in a new session (Lightning's DDP launcher re-runs it for rank 1), in ``cwd``;
    whatever is left of the session (a rank whose partner was killed, or both after ``timeout``) is killed when it
    returns."""
    env = {k: v for k, v in os.environ.items() if k not in ("WANDB_SERVICE", "MASTER_PORT", "MASTER_ADDR")}
    extra = [str(HERE), str(TESTS / "cli"), str(TESTS / "lit_modules")]  # helpers, kill_switch, FixedTaskDomain
    env["PYTHONPATH"] = os.pathsep.join([*extra, env.get("PYTHONPATH", "")])
    env["OMP_NUM_THREADS"] = "1"  # two ranks on a small machine; the same in the one-process run
    proc = subprocess.Popen(
        [sys.executable, "-m", "propel.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        cwd=cwd,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


# ------------------------------------------------------------------------------------------------------- GRPO
def grpo_config(out: Path, model_dir: Path, devices: int, max_steps: int = 4, kill_at: int | None = None) -> Path:
    callbacks = [
        {
            "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
            "init_args": {"dirpath": str(out / "ckpt"), "every_n_train_steps": 1, "save_last": True, "save_top_k": -1},
        },
        {
            "class_path": "propel.callbacks.adapters.AdapterSaver",
            "init_args": {"dirpath": str(out / "adapters"), "every_n_steps": 2},
        },
        {"class_path": "ddp_helpers.StepRecord", "init_args": {"dirpath": str(out / "record")}},
    ]
    if kill_at is not None:
        callbacks.append({"class_path": "kill_switch.KillMidStep", "init_args": {"at_step": kill_at}})
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
        "model": {
            "class_path": "ddp_helpers.PromptSeededGRPO",
            "init_args": {
                "model": str(model_dir),
                "group_size": 4,
                "max_new_tokens": 6,
                "lr": 1e-2,
                "micro_batch_size": 3,  # 16 rows in 6 micro-batches on one process, 8 rows in 3 on each rank
                # ... which group a prompt's rows differently, so a shared prompt forward would add its own float
                # rounding (2e-4 after 4 AdamW steps at lr 1e-2); the equality tested here is DDP's arithmetic
                "share_prompt": False,
                "ppo_epochs": 2,  # two all-reduced optimizer steps per rollout
                "lora": {"r": 4, "alpha": 8},
                "loss": {"loss_type": "dapo", "beta": 0.04},  # token-level: needs the global token count
                "rewards": [{"class_path": "ddp_helpers.VowelShare"}],
            },
        },
        "data": {
            "class_path": "propel.datamodules.contexts.ContextDataModule",
            "init_args": {"domain": {"class_path": "propel.domains.MathExpressionDomain"}, "contexts_per_step": 4},
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"grpo-{devices}.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def records(out: Path, name: str) -> list[dict]:
    return [json.loads(line) for line in (out / "record" / name).read_text().splitlines()]


def lora(out: Path) -> dict[str, torch.Tensor]:
    return torch.load(out / "ckpt" / "last.ckpt", weights_only=False)["state_dict"]


def max_abs_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys() and a
    return max(float((a[k] - b[k]).abs().max()) for k in a)


@pytest.fixture(scope="module")
def grpo_runs(tmp_path_factory, tiny_model_dir):
    """One process and two ranks, 4 optimizer steps each (2 rollouts x 2 PPO iterations)."""
    tmp = tmp_path_factory.mktemp("ddp_grpo")
    runs = {}
    for devices in (1, 2):
        out = tmp / f"devices-{devices}"
        proc = propel("fit", "-c", str(grpo_config(out, tiny_model_dir, devices)))
        assert proc.returncode == 0, proc.stderr[-3000:]
        runs[devices] = out
    return tmp, runs


def test_two_ranks_split_each_batch_into_whole_groups(grpo_runs):
    _, runs = grpo_runs
    single = records(runs[1], "contexts-rank0.jsonl")
    ranks = [records(runs[2], f"contexts-rank{r}.jsonl") for r in (0, 1)]
    assert [row["step"] for row in single] == [2, 4] and all(len(r) == 2 for r in ranks)
    for want, mine, theirs in zip(single, *ranks, strict=True):
        assert mine["index"] == theirs["index"] == want["index"]
        assert all(len(set(g)) == 1 and len(g) == 4 for g in mine["groups"] + theirs["groups"])  # whole groups
        assert len(mine["groups"]) == len(theirs["groups"]) == 2
        assert mine["groups"] + theirs["groups"] == want["groups"]  # rank 0 the first half, rank 1 the second


def test_two_ranks_equal_one_process_on_the_global_batch(grpo_runs):
    _, runs = grpo_runs
    one, two = records(runs[1], "metrics.jsonl"), records(runs[2], "metrics.jsonl")
    assert [r["step"] for r in one] == [r["step"] for r in two] == [2, 4]
    for want, got in zip(one, two, strict=True):
        assert set(StepKeys) <= want.keys() and want.keys() == got.keys()
        for key in want:
            assert got[key] == pytest.approx(want[key], rel=1e-4, abs=1e-5), key
    assert one[0]["train/reward/std"] > 0  # advantages were not all zero: the update had a policy gradient
    single, ddp = lora(runs[1]), lora(runs[2])
    # Float sums in another order; AdamW magnifies such a difference at weights whose gradient is near 0, so the
    # bound is on nearly all weights plus a cap on the rest (a step is 1e-2; ranks that did not average their
    # gradients would put most weights a step apart). Measured on an AVX-512 CPU (2026-12-07): median 1.1e-7, 99.9%
    # within 3.3e-5, the largest 2.7e-4 (7e-6 on the machine before).
    diff = torch.cat([(single[k] - ddp[k]).abs().flatten() for k in single])
    assert float(diff.quantile(0.999)) < 5e-5 and float(diff.max()) < 1e-3
    start = torch.load(runs[1] / "ckpt" / "epoch=0-step=2.ckpt", weights_only=False)["state_dict"]
    assert max_abs_diff(start, single) > 1e-3  # the last two steps moved the adapter: the match is not vacuous
    # the adapter folders are rank 0's alone, and the same as the one-process run's
    assert sorted(p.name for p in (runs[2] / "adapters").iterdir()) == ["step-2", "step-4"]


StepKeys = ("train/loss", "train/reward/mean", "train/reward/std", "train/kl", "train/entropy")


def test_killed_two_rank_run_resumes_to_the_uninterrupted_result(grpo_runs, tiny_model_dir):
    tmp, runs = grpo_runs
    killed = tmp / "killed"
    proc = propel("fit", "-c", str(grpo_config(killed, tiny_model_dir, 2, kill_at=2)))
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-3000:]
    ckpt = torch.load(killed / "ckpt" / "last.ckpt", weights_only=False)
    assert ckpt["global_step"] == 2 and len(ckpt["ContextDataModule"]["rank_rngs"]) == 2
    proc = propel("fit", "-c", str(grpo_config(killed, tiny_model_dir, 2)), "--ckpt_path", "last")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert torch.load(killed / "ckpt" / "last.ckpt", weights_only=False)["global_step"] == 4
    assert max_abs_diff(lora(runs[2]), lora(killed)) < 1e-6
    want, got = records(runs[2], "metrics.jsonl"), records(killed, "metrics.jsonl")
    assert [r["step"] for r in got] == [2, 4]
    for a, b in zip(want, got, strict=True):
        assert b == pytest.approx(a, rel=1e-5, abs=1e-6)
    for r in (0, 1):  # each rank resumed with its own share of the stream
        assert records(killed, f"contexts-rank{r}.jsonl") == records(runs[2], f"contexts-rank{r}.jsonl")


# --------------------------------------------------------------------------------------------------- labeling
def label_config(out: Path, model_dir: Path, devices: int) -> Path:
    domain = {"class_path": "test_labeling.FixedTaskDomain"}  # every task valid: the solver trials run too
    cfg = {
        "seed_everything": 0,
        "trainer": {
            "accelerator": "cpu",
            "devices": devices,
            **({"strategy": DDP} if devices > 1 else {}),
            "logger": False,
            "enable_progress_bar": False,
            "callbacks": [
                {"class_path": "propel.callbacks.pool_writer.PoolWriter", "init_args": {"output_dir": str(out)}}
            ],
        },
        "model": {
            "class_path": "propel.lit_modules.labeling.LabelingModule",
            "init_args": {
                "domain": domain,
                "generator": str(model_dir),
                "max_new_tokens": 6,
                "solver": {"n_trials": 2, "band": [1, 1], "max_new_tokens": 4},
            },
        },
        "data": {
            "class_path": "propel.datamodules.task_pool.TaskPoolDataModule",
            "init_args": {"domain": domain, "n_tasks": 10, "batch_size": 2},  # 5 batches: 3 on rank 0, 2 on rank 1
        },
        "return_predictions": False,
    }
    path = out.parent / f"label-{devices}.yaml"
    path.write_text(json.dumps(cfg))
    return path


def pool_rows(folder: Path) -> set[tuple]:
    frame = read_pool(folder)
    return {tuple(_comparable(v) for v in row) for row in frame.itertuples(index=False)}


def _comparable(value):
    """A pool cell as the set compares it: lists as tuples, a missing float (NaN, never equal to itself) as None,
    other floats to 6 decimals (a solve probability from batches of another size differs in the last bits)."""
    if hasattr(value, "__len__") and not isinstance(value, str):
        return tuple(value)
    if isinstance(value, float):
        return None if value != value else round(value, 6)
    return value


def test_two_rank_labeling_writes_the_same_pool_as_one(tmp_path, tiny_model_dir):
    pools = {}
    for devices in (1, 2):
        out = tmp_path / f"pool-{devices}"
        proc = propel("predict", "-c", str(label_config(out, tiny_model_dir, devices)))
        assert proc.returncode == 0, proc.stderr[-3000:]
        pools[devices] = out
    one, two = pool_rows(pools[1]), pool_rows(pools[2])
    assert len(one) == 10 and one == two
    assert len(read_pool(pools[2])) == 10  # no row twice
    ranks = sorted(p.name.split("-")[2] for p in pools[2].glob("part-*.parquet"))  # part-<ns>-r<rank>-<tag>
    assert ranks == ["r0", "r0", "r0", "r1", "r1"]  # batches 0, 2, 4 on rank 0; 1, 3 on rank 1
    summary = json.loads((pools[2] / "summary.json").read_text())
    assert summary["tasks"] == 10 and summary["rows_written_this_run"] == 10
    assert summary["solver_tokens"] == json.loads((pools[1] / "summary.json").read_text())["solver_tokens"]


def test_two_rank_evaluation_summarizes_every_rank(tmp_path, tiny_model_dir):
    """``propel test`` with 2 ranks: each rank writes its own parts, rank 0 reads them all after a barrier, and the
    summary equals the one-process summary (throughput aside)."""
    summaries = {}
    for devices in (1, 2):
        out = tmp_path / f"eval-{devices}"
        cfg = json.loads(label_config(out, tiny_model_dir, devices).read_text())
        cfg["trainer"]["callbacks"] = []
        cfg["model"]["class_path"] = "propel.lit_modules.evaluation.EvaluationModule"
        cfg["model"]["init_args"].update(output_dir=str(out), n_resamples=50)
        cfg["data"]["init_args"]["seed"] = 1
        del cfg["return_predictions"]
        path = tmp_path / f"eval-{devices}.yaml"
        path.write_text(json.dumps(cfg))
        proc = propel("test", "-c", str(path))
        assert proc.returncode == 0, proc.stderr[-3000:]
        summaries[devices] = json.loads((out / "summary.json").read_text())
        ranks = sorted(p.name.split("-")[2] for p in out.glob("part-*.parquet"))
        assert ranks == (["r0"] * 5 if devices == 1 else ["r0", "r0", "r0", "r1", "r1"])
    one, two = ({k: v for k, v in s.items() if k != "seconds" and "per_s" not in k} for s in summaries.values())
    assert one == two and one["solver_tokens"] > 0  # the token count sums both ranks' trials
