"""Stopping and resuming ``propel fit -c configs/grpo/base.yaml -c ...`` at tiny scale: a Ctrl-C or a SIGTERM in the
middle of step 2 leaves ``last.ckpt`` at step 1, and rerunning the same command ends with the adapter of a run that
was never stopped; a resume names every changed setting, refuses one that cannot take effect and records the values
in use; a finished run is not redone."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from propel.cli import main
from propel.cli.resume import CONFIG_KEY, changes, plan
from propel.errors import ConfigError
from tests.cli.kill_switch import default_sigint
from tests.cli.test_cli_grpo import probe_artifact

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).parent
BASE = str(ROOT / "configs" / "grpo" / "base.yaml")


def _overlay(root: Path, model_dir: Path, artifact: Path, max_steps: int = 3) -> Path:
    """A tiny GRPO job over the shipped base config: its run folder is ``root``."""
    cfg = {
        "seed_everything": 0,
        "trainer": {
            "default_root_dir": str(root),
            "max_steps": max_steps,
            "accelerator": "cpu",
            "logger": False,
            "enable_progress_bar": False,
            "enable_model_summary": False,
        },
        "model": {
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
            }
        },
        "data": {
            "class_path": "propel.datamodules.contexts.ContextDataModule",
            "init_args": {"domain": {"class_path": "propel.domains.MathExpressionDomain"}, "contexts_per_step": 2},
        },
    }
    root.mkdir(parents=True, exist_ok=True)
    path = root.parent / f"{root.name}.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return path


def _lora(ckpt: Path) -> dict[str, torch.Tensor]:
    return torch.load(ckpt, weights_only=False)["state_dict"]


def _files(folder: Path) -> dict[str, tuple[int, bytes]]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.read_bytes()) for p in files}


@pytest.fixture(scope="module")
def artifact(tmp_path_factory, tiny_model_dir):
    return probe_artifact(tmp_path_factory.mktemp("probe") / "artifact", tiny_model_dir)


@pytest.fixture(scope="module")
def straight(tmp_path_factory, tiny_model_dir, artifact):
    """An uninterrupted 3-step run: its command and run folder."""
    root = tmp_path_factory.mktemp("straight") / "run"
    args = ["fit", "-c", BASE, "-c", str(_overlay(root, tiny_model_dir, artifact))]
    main(args)
    return args, root


@pytest.mark.parametrize("stop", ["SIGINT", "SIGTERM"])
def test_a_stop_in_step_2_writes_step_1_and_the_same_command_resumes_to_the_uninterrupted_adapter(
    stop, straight, tmp_path, tiny_model_dir, artifact, capsys, monkeypatch
):
    root = tmp_path / "run"
    signals = tmp_path / "signal.yaml"  # the stop lands after step 2's rollouts, before its optimizer step
    marker = tmp_path / "signalled"
    stopper = {"signal": stop, "at_step": 1, "marker": str(marker)}
    spec = {"class_path": "kill_switch.SignalMidStep", "init_args": stopper}
    signals.write_text(yaml.safe_dump({"trainer": {"callbacks+": [spec]}}))
    args = ["fit", "-c", BASE, "-c", str(_overlay(root, tiny_model_dir, artifact)), "-c", str(signals)]
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", "propel.cli", *args]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, preexec_fn=default_sigint)
    assert marker.exists(), proc.stderr[-3000:]
    assert proc.returncode == 128 + getattr(signal, stop), proc.stderr[-3000:]
    last = root / "checkpoints" / "last.ckpt"
    said = proc.stderr.strip().splitlines()[-1]
    adapter = root / "adapters" / "step-1"
    assert said.startswith(f"propel: stopped by {stop}; wrote {last} (step 1); wrote the adapter {adapter}: "), said
    assert said.endswith(f"rerun `propel {' '.join(args)}` to resume") and "Traceback" not in proc.stderr
    assert torch.load(last, weights_only=False)["global_step"] == 1
    assert sorted(p.name for p in last.parent.iterdir()) == ["last.ckpt"]  # the base config saves every 10 steps
    at_stop = _lora(last)
    peft = load_file(adapter / "adapter_model.safetensors")  # the same weights, for serving tools
    assert sorted(float(v.double().sum()) for v in peft.values()) == pytest.approx(
        sorted(float(v.double().sum()) for v in at_stop.values())
    )

    monkeypatch.syspath_prepend(str(HERE))  # kill_switch, for the same command in this process
    main(args)
    err = capsys.readouterr().err
    assert f"propel: resuming from {last} at step 1 of 3; --ckpt_path none starts over" in err
    assert "changed since the checkpoint" not in err  # the same command, the same settings
    got, want = _lora(last), _lora(straight[1] / "checkpoints" / "last.ckpt")
    assert torch.load(last, weights_only=False)["global_step"] == 3 and got.keys() == want.keys() and got
    for name in want:
        torch.testing.assert_close(got[name], want[name], msg=name)
    assert any(not torch.equal(got[k], at_stop[k]) for k in got)  # steps 2 and 3 ran after the resume


def test_a_resume_applies_a_changed_lr_says_so_records_it_and_refuses_a_change_that_cannot_take_effect(
    tmp_path, tiny_model_dir, artifact, capsys
):
    overlay = str(_overlay(tmp_path / "run", tiny_model_dir, artifact, max_steps=1))
    main(["fit", "-c", BASE, "-c", overlay])
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    before = last.read_bytes()
    capsys.readouterr()

    with pytest.raises(SystemExit) as refused:
        main(["fit", "-c", BASE, "-c", overlay, "--trainer.max_steps=2", "--model.init_args.lora.r=8"])
    assert refused.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"propel: config error: cannot resume {last} with ")
    assert "model.init_args.lora.r: 4 -> 8 (the restored adapter keeps the checkpoint's rank" in lines[0]
    assert "--ckpt_path none" in lines[0] and last.read_bytes() == before

    main(["fit", "-c", BASE, "-c", overlay, "--trainer.max_steps=2", "--model.init_args.lr=5e-4"])
    err = capsys.readouterr().err
    assert f"propel: resuming from {last} at step 1 of 2" in err
    assert (
        "propel: changed since the checkpoint, applied: model.init_args.lr: 0.001 -> 0.0005 (set on the restored "
        "optimizer); trainer.max_steps: 1 -> 2"
    ) in err
    ckpt = torch.load(last, weights_only=False)
    assert ckpt["global_step"] == 2
    assert [g["lr"] for g in ckpt["optimizer_states"][0]["param_groups"]] == [5e-4]  # what the optimizer used
    assert ckpt["hyper_parameters"]["lr"] == 5e-4
    assert yaml.safe_load(ckpt[CONFIG_KEY])["model"]["init_args"]["lr"] == 5e-4


def test_rerunning_a_finished_run_says_so_and_changes_nothing(straight, capsys):
    args, root = straight
    before = _files(root)
    capsys.readouterr()
    main(args)
    last = root / "checkpoints" / "last.ckpt"
    assert f"propel: {last} is at step 3 and trainer.max_steps is 3: the run is finished" in capsys.readouterr().err
    assert _files(root) == before


def test_start_over_and_missing_checkpoints_are_said_before_anything_runs(straight, tmp_path):
    _, root = straight
    config = yaml.safe_load(Path(root / "config.yaml").read_text())
    last = root / "checkpoints" / "last.ckpt"
    over = plan(config, "none")
    assert over.ckpt_path is None and not over.finished
    assert over.lines == [f"propel: starting over (--ckpt_path none): {last} (step 3) is replaced"]
    more = plan({**config, "trainer": {**config["trainer"], "max_steps": 5}}, None)
    assert more.ckpt_path == str(last) and more.lines[1].endswith("applied: trainer.max_steps: 3 -> 5")
    elsewhere = {**config, "trainer": {**config["trainer"], "callbacks": []}}
    assert plan(elsewhere, None).ckpt_path is None
    with pytest.raises(ConfigError, match="--ckpt_path last: no ModelCheckpoint with a dirpath and save_last"):
        plan(elsewhere, "last")
    with pytest.raises(ConfigError, match="no such checkpoint file"):
        plan(config, str(tmp_path / "missing.ckpt"))


def test_a_checkpoint_written_before_a_rename_is_compared_under_the_new_name():
    """A distillation checkpoint from before ``episodes_per_context`` became ``group_size`` and
    ``max_steps_without_targets`` folded into ``max_steps_without_update`` resumes with no change to report (the
    value in use, ``max_steps_without_update``, is the one compared); a changed value is named under the new name."""
    distill = "propel.lit_modules.distill.TurnKLDistillModule"
    old = {"episodes_per_context": 4, "max_steps_without_targets": 5, "max_steps_without_update": 20, "lr": 1e-4}
    saved = {"model": {"class_path": distill, "init_args": old}}
    now = {"group_size": 4, "max_steps_without_update": 20, "lr": 1e-4}
    assert changes(saved, {"model": {"class_path": distill, "init_args": now}}) == ([], [])
    more = {"model": {"class_path": distill, "init_args": {**now, "group_size": 8}}}
    assert changes(saved, more) == ([], ["model.init_args.group_size: 4 -> 8"])


def test_a_swapped_class_is_one_change_not_every_setting_of_both_classes():
    """A resume whose logger was swapped for another (as the decisive experiment's arms continue a warm start that
    logged to W&B) names the swap once, not the ~50 init_args of both loggers; a refused key under a swapped entry
    is still refused by name."""
    wandb, csv = "propel.loggers.PropelWandbLogger", "lightning.pytorch.loggers.CSVLogger"
    saved = {"trainer": {"logger": [{"class_path": wandb, "init_args": {"project": "propel", "offline": None}},
                                    {"class_path": csv, "init_args": {"save_dir": "a"}}]},
             "model": {"class_path": "m.A", "init_args": {"lr": 1e-4, "model": "x"}}}  # fmt: skip
    now = {"trainer": {"logger": [{"class_path": csv, "init_args": {"save_dir": "b"}}]},
           "model": {"class_path": "m.A", "init_args": {"lr": 2e-4, "model": "x"}}}  # fmt: skip
    refused, applied = changes(saved, now)
    assert refused == []
    assert applied == [
        "model.init_args.lr: 0.0001 -> 0.0002 (set on the restored optimizer)",
        f"trainer.logger.0: {wandb!r} -> {csv!r}, with its own settings",
        f"trainer.logger.1: {csv!r} -> (unset), with its own settings",
    ]
    other = {**now, "model": {"class_path": "m.B", "init_args": {"lr": 1e-4, "model": "y"}}}
    refused, _ = changes(saved, other)
    assert refused == [
        "model.class_path: 'm.A' -> 'm.B' (the checkpoint holds another trainer's state)",
        "model.init_args.model: 'x' -> 'y' (the adapter was trained on the checkpoint's base model)",
    ]


def test_an_ignored_sigint_stays_ignored_and_sigterm_still_stops():
    """A background job of a non-interactive shell starts with SIGINT ignored: propel keeps it so (its user asked
    for that) and still routes SIGTERM to the checkpointing stop."""
    import threading

    from propel.cli import stops
    from propel.cli.main import _catch_stop_signals

    assert threading.current_thread() is threading.main_thread()  # signal handlers are set from the main thread only
    outer = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        previous = _catch_stop_signals()
        try:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN and signal.SIGINT not in previous
            assert signal.getsignal(signal.SIGTERM) is stops.on_signal
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
    finally:
        signal.signal(signal.SIGINT, outer)


def test_a_sigterm_to_a_script_running_fit_in_process_writes_last_ckpt(tmp_path, tiny_model_dir, artifact):
    """A script that runs ``fit`` itself (``run_lightning``, as the experiments do) has Lightning's SIGTERM handler,
    not ``propel``'s: the stop ends at the step's end (Lightning's ``SIGTERMException``), ``last.ckpt`` and the
    adapter hold it, and the script exits with SIGTERM's status and a last line saying what was written."""
    root = tmp_path / "run"
    signals = tmp_path / "signal.yaml"
    stopper = {"signal": "SIGTERM", "at_step": 1, "marker": str(tmp_path / "signalled")}
    signals.write_text(
        yaml.safe_dump({"trainer": {"callbacks+": [{"class_path": "kill_switch.SignalMidStep", "init_args": stopper}]}})
    )
    extra = ["-c", str(_overlay(root, tiny_model_dir, artifact)), "-c", str(signals)]
    script = "import sys; from pathlib import Path; from propel.cli.lightning_cli import run_lightning; "
    script += f"run_lightning('fit', Path({BASE!r}), {extra!r})"
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert (tmp_path / "signalled").exists(), proc.stderr[-3000:]
    assert proc.returncode == 143, proc.stderr[-3000:]  # the shell's code for SIGTERM, not a finished run's 0
    said = proc.stderr.strip().splitlines()[-1]
    assert said.startswith("propel: stopped by SIGTERM; wrote ") and "last.ckpt (step 2)" in said, said
    assert said.endswith(f": rerun `{Path(sys.executable).name} -c` to resume"), said  # the script's own command
    last = root / "checkpoints" / "last.ckpt"
    assert last.is_file(), proc.stderr[-3000:]
    assert torch.load(last, weights_only=False)["global_step"] == 2  # step 2 finished, then the stop
    assert (root / "adapters" / "step-2" / "adapter_model.safetensors").is_file()
