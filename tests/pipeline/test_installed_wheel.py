"""The installed package runs the main job: the wheel is built from this checkout, installed into a fresh virtual
environment (its dependencies borrowed from the test environment, without its editable propel), ``propel pipeline -c
demo`` runs at toy scale from an empty folder, finding its stage templates inside the package, and ``propel configs``
copies the shipped configs out."""

from __future__ import annotations

import json
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from propel.domains import MathExpressionDomain
from propel.pipeline.stage_configs import load_pipeline_config
from tests.pipeline.test_pipeline_e2e import N_TASKS, _seed_pool

ROOT = Path(__file__).resolve().parents[2]


def _run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=900, **kwargs)
    assert out.returncode == 0, (cmd, out.stdout[-3000:], out.stderr[-3000:])
    return out


def test_the_wheel_installs_and_runs_the_pipeline_from_an_empty_folder(tmp_path, tiny_model_dir):
    dist = tmp_path / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, ROOT])
    (wheel,) = dist.glob("propel_rl-*.whl")
    shipped = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in shipped if n.startswith(("propel/testing/", "propel/configs/experiments/"))], (
        "test corpora and experiment configs are not part of the installed package"
    )
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    _run([sys.executable, "-m", "pip", "--python", venv / "bin" / "python", "install", "--no-deps", "-q", wheel])
    site = Path(
        _run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip()
    )
    # the dependencies: this environment's site-packages as a plain path (its .pth files, the editable propel's
    # finder among them, are not read from a path entry)
    (site / "zz_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    where = _run([venv / "bin" / "python", "-c", "import propel, os; print(os.path.dirname(propel.__file__))"])
    assert where.stdout.strip() == str(site / "propel"), where.stdout
    assert (site / "propel" / "configs" / "grpo" / "base.yaml").is_file()

    empty = tmp_path / "empty"
    empty.mkdir()
    workdir = empty / "run"
    overrides = [
        f"workdir={workdir}",
        f"model={tiny_model_dir}",
        f"label.data.init_args.n_tasks={N_TASKS}",
        "label.model.init_args.solver.n_trials=4",
        "label.model.init_args.solver.band=[1,2]",
        "label.model.init_args.solver.max_new_tokens=8",
        "sampling.max_new_tokens=8",  # labeling, RVP, GRPO and evaluation: one token budget
        "probe.layers=[1]",
        "probe.poolings=[last_token]",
        "probe.sweep.archs=[linear]",
        "probe.sweep.balances=[weighted]",
        "probe.sweep.seeds=[0]",
        "probe.rvp.contexts=2",
        "sampling.group_size=2",  # GRPO's and RVP's
        "warm_start.trainer.max_steps=1",  # the demo's gate-only warm start, then one step against the probe
        "grpo.trainer.max_steps=2",
        "grpo.data.init_args.contexts_per_step=1",
        "grpo.callbacks.ModelCheckpoint.every_n_train_steps=1",
        "grpo.callbacks.AdapterSaver.every_n_steps=1",
        "evaluate.data.init_args.n_tasks=2",
        "evaluate.data.init_args.batch_size=2",
        "evaluate.model.init_args.solver.n_trials=2",
    ]
    cfg = load_pipeline_config("demo", overrides)
    _seed_pool(workdir / "label" / "pool", MathExpressionDomain(**cfg.domain.get("init_args", {})), N_TASKS, cfg.seed)
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(Path.home()), "WANDB_MODE": "offline"}
    _run([venv / "bin" / "propel", "pipeline", "-c", "demo", *overrides], cwd=empty, env=env)
    for stage in ("label", "probe", "warm_start", "grpo", "evaluate"):
        assert (workdir / stage / "summary.json").is_file(), stage
    assert json.loads((workdir / "warm_start" / "summary.json").read_text())["steps"] == 1
    assert json.loads((workdir / "grpo" / "summary.json").read_text())["steps"] == 1  # its own, after the warm start
    assert (workdir / "report" / "report.md").is_file()
    _run([venv / "bin" / "propel", "configs", "mine"], cwd=empty, env=env)  # the shipped configs, copied out to edit
    assert (empty / "mine" / "grpo" / "base.yaml").read_text() == (site / "propel/configs/grpo/base.yaml").read_text()
