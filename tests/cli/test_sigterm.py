"""A SIGTERM (``kill``, SLURM, container runtimes) or a Ctrl-C stops ``propel`` promptly, keeps what was written and
says what, and the same command resumes: here mid-labeling and mid-evaluation with the tiny model, through the real
console entry point (training: ``test_stop_resume``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import yaml

from propel.cli.main import EXIT_SIGTERM
from propel.domains import MathExpressionDomain
from propel.testing.plain_configs import read_config_files
from tests.cli.kill_switch import default_sigint

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent  # kill_switch, on the subprocesses' PYTHONPATH
N_TASKS, BATCH = 24, 4


def _overlay(tmp_path: Path, model: Path) -> Path:
    pool = tmp_path / "pool"
    overlay = {
        "trainer": {
            "default_root_dir": str(tmp_path),
            "callbacks": [
                {"class_path": "propel.callbacks.pool_writer.PoolWriter", "init_args": {"output_dir": str(pool)}}
            ],
        },
        "model": {
            "init_args": {
                "generator": str(model),
                "max_new_tokens": 8,
                "solver": {"n_trials": 2, "band": [1, 1], "max_new_tokens": 4},
            }
        },
        # each file is interpolated alone: the template's ${...} pool_dir does not follow the callback's here
        "data": {"init_args": {"n_tasks": N_TASKS, "batch_size": BATCH, "pool_dir": str(pool)}},
    }
    path = tmp_path / "overlay.yaml"
    path.write_text(yaml.safe_dump(overlay))
    return path


def _parts(pool: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(pool.glob("part-*.parquet"))}


def _stop_once_a_part_is_written(cmd: list[str], folder, sig, job: str) -> tuple[int, str, float]:
    """Run ``cmd``, send ``sig`` once its first part file is in ``folder``; its exit code, stderr and the seconds
    from the signal to its exit."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not list(folder.glob("part-*.parquet")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"{job} ended before any part was written: make it longer"
        proc.send_signal(sig)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=60)
        return proc.returncode, err, time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()


def test_sigterm_mid_labeling_stops_promptly_and_the_rerun_completes_the_same_pool(tmp_path, tiny_model_dir):
    cmd = [sys.executable, "-m", "propel.cli", "predict", "-c", "configs/math/label.yaml"]
    cmd += ["-c", str(_overlay(tmp_path, tiny_model_dir))]
    pool = tmp_path / "pool"
    returncode, err, stopped_in = _stop_once_a_part_is_written(cmd, pool, signal.SIGTERM, "labeling")
    assert returncode == EXIT_SIGTERM, err[-3000:]
    assert "stopped by SIGTERM; the labeled pool holds " in err and "Traceback" not in err, err[-3000:]
    assert stopped_in < 15, f"took {stopped_in:.1f}s to stop after SIGTERM"
    kept = _parts(pool)
    rows = sum(len(pd.read_parquet(pool / name)) for name in kept)
    assert 0 < rows < N_TASKS  # cut short, rows kept
    said = re.search(r"the labeled pool holds (\d+) of 24 tasks in (\S+): rerun `propel predict -c .* to resume", err)
    assert said and int(said[1]) == rows and said[2] == str(pool), err[-3000:]  # what the folder holds
    assert not (pool / "summary.json").exists()  # the pool is not marked finished

    rerun = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    after = _parts(pool)
    assert all(after[name] == data for name, data in kept.items())  # what was written before the kill, untouched
    frame = pd.concat([pd.read_parquet(pool / name) for name in after], ignore_index=True)
    label = read_config_files([ROOT / "configs" / "math" / "label.yaml"])
    domain = MathExpressionDomain(**label["model"]["init_args"]["domain"]["init_args"])
    expected = [c.id for c in domain.contexts(N_TASKS, label["seed_everything"])]
    assert sorted(frame["id"]) == sorted(expected)  # every context labeled exactly once, none twice
    assert (pool / "summary.json").exists()


def test_ctrl_c_mid_evaluation_counts_the_tasks_on_disk_and_names_the_evaluation(tmp_path, tiny_model_dir):
    """``propel test`` stopped by Ctrl-C said "nothing was saved" with rows on disk, and its rerun, which resumed
    them, said "labeling": the last line counts what the folder holds and both name the evaluation."""
    out = tmp_path / "eval"
    stopper = {"signal": "SIGINT", "after_batch": 1, "marker": str(tmp_path / "signalled")}
    overlay = {
        "trainer": {
            "default_root_dir": str(tmp_path),
            "logger": False,
            "callbacks+": [{"class_path": "kill_switch.SignalAfterBatch", "init_args": stopper}],
        },
        "model": {
            "init_args": {
                "generator": str(tiny_model_dir),
                "max_new_tokens": 8,
                "output_dir": str(out),
                "solver": {"n_trials": 2, "band": [1, 1], "max_new_tokens": 4},
            }
        },
        "data": {"init_args": {"n_tasks": N_TASKS, "batch_size": BATCH}},
    }
    (tmp_path / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    cmd = [sys.executable, "-m", "propel.cli", "test", "-c", "configs/math/eval.yaml"]
    cmd += ["-c", str(tmp_path / "overlay.yaml")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")])}
    stopped = subprocess.run(
        cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, preexec_fn=default_sigint
    )
    returncode, err = stopped.returncode, stopped.stderr
    assert (tmp_path / "signalled").exists() and returncode == 130, err[-3000:]
    rows = sum(len(pd.read_parquet(p)) for p in out.glob("part-*.parquet"))
    assert rows == 2 * BATCH  # the two batches before the stop, nothing after it
    said = re.search(r"SIGINT; the evaluation holds (\d+) of 24 tasks in (\S+): rerun `propel test .*` to resume", err)
    assert said and int(said[1]) == rows and said[2] == str(out), err[-3000:]
    assert "nothing was saved" not in err and "Traceback" not in err

    rerun = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    said = f"resuming: {rows} of {N_TASKS} tasks already in {out}, evaluating the other {N_TASKS - rows}"
    assert said in rerun.stderr and "labeling" not in rerun.stderr, rerun.stderr[-3000:]
    assert (out / "summary.json").exists()
