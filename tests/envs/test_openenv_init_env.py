"""The environment ``openenv init`` generates, as a new user meets it: OpenEnv's echo template (``reset()`` takes no
arguments, ``step`` pays 0.1 per echoed character and never ends an episode), written by the real CLI into a temporary
folder and left as generated. ``propel fit`` trains GRPO on it in-process (imported from the folder that holds the
project, as ``PYTHONPATH=.`` does for a user) and over its own app, served with uvicorn as its ``server/app.py`` says.
Its episodes end when the rollout cuts a turn past ``max_new_tokens``: an outcome with the environment's return, not an
infrastructure failure."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
NAME = "echo"
ENV = "echo.server.EchoEnvironment"
pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def project(require, missing, tmp_path_factory) -> Path:
    """``openenv init echo`` by the CLI a user types. Its PATH holds only the venv's scripts: the CLI also runs
    ``uv lock`` when it finds ``uv`` (the network); without it, it says so and the project is complete."""
    require("openenv.core")
    cli = Path(sys.executable).parent / "openenv"
    if not cli.is_file():
        missing(f"no openenv CLI next to {sys.executable} (openenv-core installs it)")
    root = tmp_path_factory.mktemp("user")
    done = subprocess.run(
        [str(cli), "init", NAME, "--output-dir", str(root)],
        env={**os.environ, "PATH": str(cli.parent)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (root / NAME / "server/app.py").is_file()
    return root / NAME


@pytest.fixture()
def served(project):
    """The generated app as its ``server/app.py`` documents it, ``uvicorn server.app:app`` in the project folder, on
    a free port (uvicorn prints the one it bound); its URL. Stopped at the end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "server.app:app", "--host", "127.0.0.1", "--port", "0"],
        cwd=project,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines, up = [], threading.Event()

    def read():  # drains the log for the server's whole life (a full pipe would stall it)
        for line in proc.stdout:
            lines.append(line)
            if "Uvicorn running on" in line:
                up.set()
        up.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        assert up.wait(120) and proc.poll() is None, "".join(lines)
        yield re.search(r"Uvicorn running on (http://\S+)", "".join(lines)).group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


def _echo_rewards(sample) -> list[float]:
    """The echo environment's own rewards for the episode's calls, from a fresh in-process instance."""
    from echo.models import EchoAction
    from echo.server import EchoEnvironment

    from propel.engines.tool_calls import ToolCall, parse_tool_call

    env = EchoEnvironment()
    env.reset()
    calls = [parse_tool_call(t.text) for t in sample.turns if t.role == "assistant"]
    return [env.step(EchoAction(**c.arguments)).reward for c in calls if isinstance(c, ToolCall)]


@pytest.mark.parametrize("mode", ["in_process", "server"])
def test_grpo_trains_on_the_environment_openenv_init_generates(
    mode, project, tiny_model_dir, tmp_path, monkeypatch, request
):
    from propel.cli import main
    from propel.rollouts.trajectories import read_trajectories

    monkeypatch.chdir(tmp_path)  # the run's checkpoints and trajectories land under runs/openenv here
    monkeypatch.syspath_prepend(str(project.parent))  # PYTHONPATH=<the folder holding the project>
    overlay = tmp_path / "scripted.yaml"  # the scripted policy (the tiny model writes no calls), after the config's
    overlay.write_text(yaml.safe_dump({"trainer": {"callbacks+": [{"class_path": "openenv_policy.ScriptedEchoer"}]}}))
    env = ENV if mode == "in_process" else request.getfixturevalue("served")
    one_at_a_time = ["--data.init_args.concurrency=1"] if mode == "server" else []  # the app serves one session
    main(
        [
            "fit",
            "-c",
            str(ROOT / "configs/grpo/base.yaml"),
            "-c",
            str(ROOT / "configs/openenv/grpo.yaml"),
            "-c",
            str(overlay),
            "--data.init_args.env.init_args.env",
            env,
            *one_at_a_time,
            "--data.init_args.env.init_args.max_turns=5",
            "--model.init_args.model",
            str(tiny_model_dir),
            "--model.init_args.group_size=2",
            "--model.init_args.max_new_tokens=32",
            "--model.init_args.lr=1e-3",
            "--trainer.max_steps=2",
            "--trainer.accelerator=cpu",
            "--trainer.logger=false",
            "--trainer.enable_progress_bar=false",
        ]
    )
    steps = sorted((tmp_path / "runs/openenv/trajectories").glob("step-*.parquet"))
    assert [p.name for p in steps] == ["step-000000.parquet", "step-000001.parquet"]
    assert (tmp_path / "runs/openenv/checkpoints/last.ckpt").is_file()
    samples = [s for p in steps for s in read_trajectories(p)]
    assert len(samples) == 2 * 2 * 2
    for s in samples:  # every episode: two echoes, then a turn cut at 32 tokens that ends it with the return so far
        assert s.infra_error is None and s.valid and s.info["finish_reason"] == "length"
        assert s.turns[-1].role == "assistant" and s.turns[-1].finish_reason == "length"
        assert len(s.turns[-1].token_ids) == 32 and "<tool_call>" not in s.turns[-1].text
        rewards = [t.info["reward"] for t in s.turns if t.role == "tool"]
        assert rewards == _echo_rewards(s) == pytest.approx([0.5, 1.2])  # the environment's, 0.1 per character
        assert s.info["reward"] == pytest.approx(sum(rewards))
        assert s.artifacts["verifier"] == {"return": pytest.approx(1.7), "env_done": False, "steps": 2}
