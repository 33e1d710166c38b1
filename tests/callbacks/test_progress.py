"""Progress a person can follow: without a terminal, ``propel fit`` prints one line per step (reward, its components,
seconds and each phase's) and labeling a line per batch (tasks done of the total, valid ones); the run's config lands
in its own folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from propel.lit_modules.phases import Phases, clock
from tests.cli.test_cli_grpo import probe_artifact

ROOT = Path(__file__).resolve().parents[2]


def test_phases_time_each_phase_and_say_how_far_along():
    phases = Phases()
    assert phases.describe() == ""
    phases.start("rollouts", total=8, unit="samples")
    assert phases.describe().startswith("rollouts (8 samples) 0:0")
    time.sleep(0.05)
    phases.start("update", total=4, unit="micro-batches")
    phases.advance()
    time.sleep(0.02)
    phases.start("update", total=4, unit="micro-batches")  # a second PPO epoch: its count restarts, not its clock
    phases.advance(3)
    assert phases.describe().startswith("update 3/4 micro-batches")
    split = phases.split()
    assert list(split) == ["rollouts", "update"] and split["rollouts"] >= 0.05 and split["update"] >= 0.02
    phases.stop()
    assert phases.describe() == "" and phases.split() == phases.seconds
    phases.count(tasks=16, valid=5)
    phases.count(tasks=16, valid=2)
    phases.totals["tasks"] = 40
    assert phases.describe_counts() == "tasks 32/40, valid 7"
    phases.reset()
    assert phases.seconds == {} and phases.counts == {"tasks": 32, "valid": 7}  # the run's counts stay
    assert [clock(s) for s in (41, 723, 3723)] == ["0:41", "12:03", "1:02:03"]


def _propel(args: list[str], cwd: Path, out: Path) -> subprocess.CompletedProcess:
    """``propel ARGS`` in a new process with stdout redirected to the file ``out`` (not a terminal)."""
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}
    with out.open("w") as stdout:
        return subprocess.run(
            [sys.executable, "-m", "propel.cli", *args],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=600,
            cwd=cwd,
            env=env,
        )


def test_fit_without_a_terminal_prints_a_line_per_step(tmp_path, tiny_model_dir):
    artifact = probe_artifact(tmp_path / "probe", tiny_model_dir)
    run = tmp_path / "run"
    overlay = {
        "seed_everything": 0,
        "trainer": {
            "default_root_dir": str(run),
            "max_steps": 2,
            "accelerator": "cpu",
            "enable_model_summary": False,
            "logger": {
                "class_path": "propel.loggers.PropelWandbLogger",
                "init_args": {"save_dir": str(tmp_path / "runs"), "offline": True},
            },
        },
        "model": {
            "init_args": {
                "model": str(tiny_model_dir),
                "group_size": 2,
                "max_new_tokens": 6,
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
    (tmp_path / "tiny.yaml").write_text(json.dumps(overlay))
    out = tmp_path / "stdout.txt"
    proc = _propel(["fit", "-c", "grpo/base", "-c", "tiny.yaml"], tmp_path, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = out.read_text().splitlines()
    assert "fit: from step 0 to step 2, a line per step" in lines
    steps = [line for line in lines if line.startswith("step ")]
    assert [line.split()[1] for line in steps] == ["1/2", "2/2"], lines
    number = r"-?\d+\.\d+"
    pattern = (
        rf"^step \d/2  reward {number} \(probe {number}\)  loss \S+  {number} s "
        rf"\(rollouts {number} s, grading {number} s, update {number} s\)$"
    )
    for line in steps:
        assert re.match(pattern, line), line
    assert any(line.startswith("fit: finished at step 2 in ") for line in lines)
    assert "Epoch" not in out.read_text() and "\x1b[" not in out.read_text()  # no bar, no terminal codes
    # the resolved config is the run folder's, not the logger's folder every run shares
    assert "max_steps: 2" in (run / "config.yaml").read_text()
    assert not (tmp_path / "runs" / "config.yaml").exists()


def test_labeling_without_a_terminal_prints_tasks_done_of_the_total(tmp_path, tiny_model_dir):
    out = tmp_path / "stdout.txt"
    args = [
        "predict",
        "-c",
        "math/label",  # a shipped config by name, from a folder without configs/
        f"--model.init_args.generator={tiny_model_dir}",
        "--data.init_args.n_tasks=4",
        "--data.init_args.batch_size=2",
        "--model.init_args.solver.n_trials=2",
        "--model.init_args.solver.band=[1,1]",
        "--model.init_args.max_new_tokens=8",
        "--model.init_args.solver.max_new_tokens=4",
    ]
    proc = _propel(args, tmp_path, out)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = out.read_text().splitlines()
    batches = [line for line in lines if line.startswith("predict: batch ")]
    assert len(batches) == 2, lines
    first = re.match(r"^predict: batch 1/2, tasks 2/4, valid (\d), (\d+:\d\d) elapsed, ~\d+:\d\d left$", batches[0])
    assert first, batches[0]
    assert re.match(r"^predict: batch 2/2, tasks 4/4, valid \d, \d+:\d\d elapsed, ~0:00 left$", batches[1])
    assert any(re.match(r"^predict: finished batch 2/2, tasks 4/4, valid \d in \d+:\d\d$", line) for line in lines)
    assert (tmp_path / "pools" / "math_expression" / "config.yaml").is_file()  # the run folder the config names


def test_a_long_batch_says_its_phase_while_it_runs(capfd):
    """Without a terminal, a step or batch that runs on prints where it is every ``every_n_seconds``."""
    import lightning.pytorch as pl
    from torch.utils.data import DataLoader

    from propel.callbacks.progress import StepProgress

    class Slow(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.phases = Phases()

        def predict_step(self, batch, batch_idx):
            self.phases.reset()
            self.phases.start("solving", total=3, unit="tasks")
            time.sleep(0.4)
            self.phases.count(tasks=1)
            self.phases.stop()
            return batch

    trainer = pl.Trainer(
        callbacks=[StepProgress(every_n_seconds=0.1, plain=True)], logger=False, enable_model_summary=False
    )
    trainer.predict(Slow(), DataLoader(range(2), batch_size=None), return_predictions=False)
    lines = capfd.readouterr().out.splitlines()
    running = [line for line in lines if " running " in line]
    assert any(re.match(r"^predict: batch 1/2 running 0:00: solving \(3 tasks\) 0:00$", line) for line in running)
    assert any(line.startswith("predict: batch 2/2 running") for line in running), lines
    assert "predict: batch 1/2, tasks 1, " in "\n".join(lines)
