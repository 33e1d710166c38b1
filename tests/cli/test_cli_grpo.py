"""GRPO through the real ``propel`` CLI at tiny scale: YAML probe reward, checkpoints, W&B metrics and tables,
peft adapters, and ``--ckpt_path last`` resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from propel.probes.artifact import ProbeArtifact
from propel.probes.heads import ProbeHead
from propel.testing.wandb_offline import find_run_file, read_history

ROOT = Path(__file__).resolve().parents[2]


def printed_config(*overlays: str) -> str:
    """``propel fit --print_config`` of the base and math GRPO configs plus ``overlays`` (it must succeed)."""
    configs = ["configs/grpo/base.yaml", "configs/math/grpo.yaml", *overlays]
    cmd = [sys.executable, "-m", "propel.cli", "fit"] + [a for c in configs for a in ("-c", c)] + ["--print_config"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def test_print_config_of_the_shipped_configs():
    out = printed_config()
    for needle in (
        "propel.lit_modules.grpo.GRPOModule",
        "ProbeReward",
        "artifact: runs/probe/artifact",
        "MathExpressionDomain",
        "save_last: true",
        "group_size: 8",
    ):
        assert needle in out, needle


def test_mining_overlay_keeps_every_callback():
    out = printed_config("configs/math/mining.yaml")
    for needle in ("ModelCheckpoint", "CollapseDetector", "AdversarialProbeMining", "output_dir: runs/grpo/mined"):
        assert needle in out, needle


def test_async_overlay_turns_on_async_rollouts_with_vllm():
    """configs/grpo/async.yaml validates against the GRPO module's signature and sets the async keys."""
    out = printed_config("configs/grpo/async.yaml")
    for needle in ("async_rollouts: true", "max_staleness: 1", "engine: vllm", "importance_correction: true"):
        assert needle in out, needle


def probe_artifact(directory: Path, reference: Path, dim: int = 64) -> Path:
    """A throwaway probe on the tiny model's layer-1 last-token features (random head, normalized features)."""
    torch.manual_seed(0)
    head = ProbeHead("linear", dim)
    feats = torch.randn(32, dim)
    head.set_normalization(feats.mean(0), feats.std(0))
    return ProbeArtifact(head, str(reference), layer=1, pooling="last_token", max_length=128).save(directory)


def _fit(*args: str) -> None:
    """One ``propel fit`` in-process, then close the W&B run as a process exit would (flushes the run file)."""
    import wandb

    from propel.cli import main

    main(["fit", *args])
    wandb.finish()


def _history(runs: Path, key: str, rows: int, timeout_s: float = 60.0) -> list[dict]:
    """History of the newest offline run once ``rows`` rows with ``key`` are on disk (the W&B service writes the
    file asynchronously, even after ``wandb.finish``)."""
    deadline = time.monotonic() + timeout_s
    while True:
        history = read_history(find_run_file(runs).parent)
        if sum(key in row for row in history) >= rows or time.monotonic() > deadline:
            return history
        time.sleep(0.5)


def _config(tmp_path: Path, model_dir: Path, artifact: Path, max_steps: int) -> Path:
    cfg = {
        "seed_everything": 0,
        "trainer": {
            "max_steps": max_steps,
            "accelerator": "cpu",
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "log_every_n_steps": 1,
            "logger": {
                "class_path": "propel.loggers.PropelWandbLogger",
                "init_args": {"save_dir": str(tmp_path / "runs"), "offline": True, "id": "grpo-cli-test"},
            },
            "callbacks": [
                {
                    "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                    "init_args": {
                        "dirpath": str(tmp_path / "ckpt"),
                        "every_n_train_steps": 1,
                        "save_last": True,
                        "save_top_k": -1,
                    },
                },
                {"class_path": "propel.callbacks.samples.SampleTable", "init_args": {"every_n_steps": 1}},
                {
                    "class_path": "propel.callbacks.adapters.AdapterSaver",
                    "init_args": {"dirpath": str(tmp_path / "adapters"), "every_n_steps": 2},
                },
            ],
        },
        "model": {
            "class_path": "propel.lit_modules.grpo.GRPOModule",
            "init_args": {
                "model": str(model_dir),
                "group_size": 2,
                "max_new_tokens": 6,
                "lr": 1e-3,
                "lora": {"r": 4, "alpha": 8},
                "rewards": [
                    {
                        "class_path": "propel.rewards.probe_reward.ProbeReward",
                        "init_args": {"artifact": str(artifact), "gate": {"mode": "probe_only"}, "text": "task"},
                    }
                ],
            },
        },
        "data": {
            "class_path": "propel.datamodules.contexts.ContextDataModule",
            "init_args": {"domain": {"class_path": "propel.domains.MathExpressionDomain"}, "contexts_per_step": 2},
        },
    }
    path = tmp_path / f"grpo-{max_steps}.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory, tiny_model_dir):
    tmp = tmp_path_factory.mktemp("grpo_cli")
    artifact = probe_artifact(tmp / "probe", tiny_model_dir)
    _fit("-c", str(_config(tmp, tiny_model_dir, artifact, max_steps=2)))
    return tmp, artifact


def test_fit_writes_checkpoints_metrics_tables_and_adapters(cli_run):
    tmp, _ = cli_run
    ckpt = torch.load(tmp / "ckpt" / "last.ckpt", weights_only=False)
    assert ckpt["global_step"] == 2 and ckpt["lora_spec"]["r"] == 4
    assert ckpt["state_dict"] and all("lora_" in k for k in ckpt["state_dict"])
    history = _history(tmp / "runs", "train/loss", 2)
    losses = [row["train/loss"] for row in history if "train/loss" in row]
    assert len(losses) == 2 and all(abs(x) < 1e3 for x in losses)
    probe_means = [row["train/reward/probe/mean"] for row in history if "train/reward/probe/mean" in row]
    assert probe_means and all(m != -1.0 for m in probe_means)  # probe_only: real logits, not the penalty
    tables = [row for row in history if "samples/_type" in row]
    assert len(tables) == 2 and all(t["samples/_type"] == "table-file" and t["samples/nrows"] == 4 for t in tables)
    assert [t["trainer/global_step"] for t in tables] == [1, 2]
    table_files = list((tmp / "runs").glob("**/media/table/samples_*.table.json"))
    data = json.loads(table_files[0].read_text())
    assert data["columns"][:6] == ["step", "prompt_tail", "completion", "valid", "topic", "reward"]
    assert data["columns"][6] == "probe" and len(data["data"]) == 4
    # the step-2 adapter folder holds the checkpoint's LoRA weights, under peft's config with the run's rank
    from safetensors.torch import load_file

    adapter = tmp / "adapters" / "step-2"
    assert json.loads((adapter / "adapter_config.json").read_text())["r"] == 4
    saved = load_file(adapter / "adapter_model.safetensors")
    ckpt_sums = sorted(float(v.double().sum()) for v in ckpt["state_dict"].values())
    assert len(saved) == len(ckpt_sums) > 0
    assert sorted(float(v.double().sum()) for v in saved.values()) == pytest.approx(ckpt_sums)


def test_resume_from_last_through_the_cli(cli_run, tiny_model_dir):
    tmp, artifact = cli_run
    _fit("-c", str(_config(tmp, tiny_model_dir, artifact, max_steps=3)), "--ckpt_path", "last")
    ckpt = torch.load(tmp / "ckpt" / "last.ckpt", weights_only=False)
    assert ckpt["global_step"] == 3 and ckpt["ContextDataModule"]["next_index"] == 3
    # offline W&B writes the resumed part into a new run folder (same id; `wandb sync` merges them)
    steps = [row["trainer/global_step"] for row in _history(tmp / "runs", "train/loss", 1) if "train/loss" in row]
    assert steps == [2]


def test_checkpoint_and_adapter_folder_give_the_same_policy(cli_run, tiny_model_dir):
    from propel.models import load_model
    from propel.models.trained_policy import load_policy

    tmp, _ = cli_run
    ids = load_model(str(tiny_model_dir))[1](["Problem: 3 + 4"], return_tensors="pt")
    from_ckpt, _ = load_policy(str(tiny_model_dir), str(tmp / "ckpt" / "epoch=0-step=2.ckpt"))
    from_folder, _ = load_policy(str(tiny_model_dir), str(tmp / "adapters" / "step-2"))
    base, _ = load_model(str(tiny_model_dir))
    with torch.no_grad():
        want = from_folder(**ids).logits
        torch.testing.assert_close(from_ckpt(**ids).logits, want)
        assert not torch.allclose(base(**ids).logits, want)  # the adapter was trained: it changes the policy


def test_propel_test_base_vs_trained(cli_run, tiny_model_dir):
    from propel.cli import main
    from propel.pipeline.compare import compare_dirs

    tmp, _ = cli_run
    common = [
        "--config",
        str(ROOT / "configs/math/eval.yaml"),
        "--trainer.logger=false",
        "--trainer.enable_progress_bar=false",
        f"--trainer.default_root_dir={tmp}",  # where LightningCLI saves config.yaml (not the repo)
        f"--model.init_args.generator={tiny_model_dir}",
        "--data.init_args.n_tasks=2",
        "--model.init_args.solver.n_trials=2",
        "--model.init_args.solver.band=[1,1]",
        "--model.init_args.max_new_tokens=8",
        "--model.init_args.solver.max_new_tokens=4",
    ]
    main(["test", *common, f"--model.init_args.output_dir={tmp / 'eval_base'}"])
    main(
        [
            "test",
            *common,
            f"--model.init_args.output_dir={tmp / 'eval_trained'}",
            f"--model.init_args.adapter={tmp / 'adapters' / 'step-2'}",
        ]
    )
    base = json.loads((tmp / "eval_base" / "summary.json").read_text())
    trained = json.loads((tmp / "eval_trained" / "summary.json").read_text())
    assert base["tasks"] == trained["tasks"] == 2 and base["adapter"] is None and trained["adapter"]
    table = compare_dirs(tmp / "eval_base", tmp / "eval_trained", tmp / "compare")
    assert table.startswith("| metric | base | trained |")
    hist = f"| solve_count_hist | {base['solve_count_hist']} | {trained['solve_count_hist']} |"
    assert hist in table and (tmp / "compare" / "compare.md").read_text() == table
    from PIL import Image

    with Image.open(tmp / "compare" / "solve_counts.png") as image:  # a rendered figure, not an empty file
        assert image.format == "PNG" and min(image.size) > 200 and len(set(image.convert("L").getdata())) > 2


def test_resume_from_a_named_checkpoint_applies_and_names_a_changed_lr(cli_run, tiny_model_dir, capsys):
    """``--ckpt_path FILE``: Lightning would put the checkpoint's lr over the config's without a word; here the
    config's is the one used, named, and recorded."""
    tmp, artifact = cli_run
    ckpt = tmp / "ckpt" / "epoch=0-step=2.ckpt"
    capsys.readouterr()
    _fit(
        "-c",
        str(_config(tmp, tiny_model_dir, artifact, max_steps=3)),
        "--model.init_args.lr=0.5",
        "--ckpt_path",
        str(ckpt),
    )
    err = capsys.readouterr().err
    assert f"propel: resuming from {ckpt} at step 2 of 3" in err
    assert "model.init_args.lr: 0.001 -> 0.5 (set on the restored optimizer)" in err
    last = torch.load(tmp / "ckpt" / "last.ckpt", weights_only=False)
    assert last["global_step"] == 3 and last["hyper_parameters"]["lr"] == 0.5
    assert [g["lr"] for g in last["optimizer_states"][0]["param_groups"]] == [0.5]


def _lora_weights(ckpt: Path) -> dict[str, torch.Tensor]:
    return torch.load(ckpt, weights_only=False)["state_dict"]


def test_killed_mid_step_resumes_to_the_uninterrupted_result(tmp_path, tiny_model_dir):
    """SIGKILL inside step 3 (rollouts done, gradients computed, no optimizer step), rerun with ``--ckpt_path last``:
    the adapter after step 4 equals the adapter of a run that was never interrupted."""
    artifact = probe_artifact(tmp_path / "probe", tiny_model_dir)
    straight, killed = tmp_path / "straight", tmp_path / "killed"
    straight.mkdir(), killed.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}  # this process's W&B service is not theirs
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])

    def propel_fit(*args: str) -> subprocess.CompletedProcess:  # a new process each, as after a real kill
        cmd = [sys.executable, "-m", "propel.cli", "fit", *args]
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)

    proc = propel_fit("-c", str(_config(straight, tiny_model_dir, artifact, max_steps=4)))
    assert proc.returncode == 0, proc.stderr[-2000:]
    cfg = json.loads(_config(killed, tiny_model_dir, artifact, max_steps=4).read_text())
    cfg["trainer"]["callbacks"].append({"class_path": "kill_switch.KillMidStep", "init_args": {"at_step": 2}})
    path = killed / "grpo-kill.yaml"
    path.write_text(json.dumps(cfg))
    proc = propel_fit("-c", str(path))
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert torch.load(killed / "ckpt" / "last.ckpt", weights_only=False)["global_step"] == 2
    proc = propel_fit("-c", str(_config(killed, tiny_model_dir, artifact, max_steps=4)), "--ckpt_path", "last")
    assert proc.returncode == 0, proc.stderr[-2000:]
    want, got = _lora_weights(straight / "ckpt" / "last.ckpt"), _lora_weights(killed / "ckpt" / "last.ckpt")
    assert torch.load(killed / "ckpt" / "last.ckpt", weights_only=False)["global_step"] == 4
    assert want.keys() == got.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], msg=name)
    trained = _lora_weights(killed / "ckpt" / "epoch=0-step=2.ckpt")
    assert any(not torch.equal(trained[k], got[k]) for k in got)  # steps 3-4 moved the adapter after the resume
