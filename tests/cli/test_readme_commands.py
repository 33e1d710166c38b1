"""Every ``propel`` command in the bash blocks of README.md and of the documentation site (``docs/**/*.md``) is a
valid invocation as written: each goes through the real CLI (``--print_config``: every key and value validated,
every default filled in), and the probe-on-cached-features command runs for real with its placeholders pointing at
synthetic features. A documented command this test does not know fails it, so a new one cannot go unchecked."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PREFIXES = (".venv/bin/propel ", ".venv/bin/python -m propel.")


def documented_files() -> list[Path]:
    """README.md, then every page of the documentation site."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def documented_commands() -> list[str]:
    """The propel commands of the bash blocks of README.md and docs/**/*.md (continuation lines joined, trailing
    comments dropped), each once, in the order they first appear."""
    commands: list[str] = []
    for path in documented_files():
        for block in re.findall(r"```bash\n(.*?)```", path.read_text(), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                line = re.sub(r"\s+#.*$", "", line).strip()
                if line.startswith(PREFIXES):
                    command = " ".join(line.split())
                    if command not in commands:
                        commands.append(command)
    return commands


def _argv(command: str, subs: dict[str, str]) -> list[str]:
    for name, value in subs.items():
        command = command.replace(name, value)
    return shlex.split(command)


def test_the_docs_have_the_commands_this_test_checks():
    commands = documented_commands()
    subcommands = {shlex.split(c)[1] if "bin/propel" in c else shlex.split(c)[2] for c in commands}
    assert subcommands == {"predict", "probe", "fit", "test", "pipeline", "propel.pipeline.compare"}, commands


def test_every_documented_propel_command_validates_as_written(capsys):
    from propel.cli import main

    checked = 0
    for command in documented_commands():
        argv = _argv(command, {"CACHE_KEY": "key"})
        if argv[0] != ".venv/bin/propel":
            continue
        args = argv[1:] + ([] if "--print_config" in argv else ["--print_config"])
        try:
            main(args)
            code = 0
        except SystemExit as done:
            code = done.code
        out = capsys.readouterr()
        assert code in (0, None), f"{command}: {out.err[-1500:]}"
        assert "class_path" in out.out or "workdir" in out.out, command
        checked += 1
    assert checked >= 6


def test_documented_probe_fit_command_runs_with_its_placeholders_filled(tmp_path, monkeypatch):
    """The one documented command that needs files made elsewhere: ``CACHE_KEY`` and the pool point at synthetic
    data."""
    from propel.cli import main
    from propel.probes.artifact import ProbeArtifact
    from propel.testing.probe_data import write_synthetic

    (command,) = [c for c in documented_commands() if "configs/probe/fit.yaml" in c]
    feats, labels = write_synthetic(tmp_path / "data", n=300, keys=("layer12/mean_full",), signal=(3.0,))
    argv = _argv(command, {"runs/probe/cache/CACHE_KEY": str(feats), "pools/math_expression": str(labels)})
    argv = [a.replace("configs/", f"{ROOT}/configs/", 1) if a.startswith("configs/") else a for a in argv]
    monkeypatch.chdir(tmp_path)
    main([*argv[1:], "--trainer.max_epochs=2", "--trainer.logger=false", "--trainer.enable_checkpointing=false"])
    artifact = ProbeArtifact.load(tmp_path / "runs" / "probe" / "artifact")
    assert artifact.layer == 12 and artifact.pooling == "mean_full"


def test_documented_compare_command_runs(tmp_path):
    import subprocess
    import sys

    (command,) = [c for c in documented_commands() if "propel.pipeline.compare" in c]
    summary = {"tasks": 4, "valid_rate": 0.5, "utility": 0.25, "solve_count_hist": [1, 1, 0], "n_trials": 2}
    for name in ("base", "trained"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "summary.json").write_text(json.dumps(summary))
    subs = {"BASE_DIR": str(tmp_path / "base"), "TRAINED_DIR": str(tmp_path / "trained"), "OUT_DIR": str(tmp_path)}
    argv = _argv(command, subs)
    out = subprocess.run([sys.executable, *argv[1:]], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "| valid_rate |" in out.stdout and (tmp_path / "solve_counts.png").exists()


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_top_level_flags_answer_without_heavy_imports(flag):
    """``propel --help``/``--version`` answer from the entry module alone: no torch, Lightning or transformers."""
    from tests.cli.light_run import run_light

    out = run_light([flag], ROOT, exit_code=0)
    if flag == "--help":
        from propel.cli.main import subcommands

        listed = subcommands()
        assert {"fit", "test", "predict", "probe", "pipeline", "serve-env"} <= set(listed)  # registered entry points
        for name, line in listed.items():
            assert f"  {name}" in out.stdout and line in out.stdout
    else:
        assert re.fullmatch(r"propel \d+\.\d+\.\d+\S*\n", out.stdout)


RUN_ELSEWHERE = {
    ".venv/bin/propel predict -c configs/math/label.yaml": (
        "tests/cli/test_sigterm.py",
        "test_sigterm_mid_labeling_stops_promptly_and_the_rerun_completes_the_same_pool",
    ),
    ".venv/bin/propel probe -c configs/probe/sweep.yaml": (
        "tests/pipeline/test_pipeline_e2e.py",  # the probe stage runs `propel probe -c` on sweep.yaml's keys
        "test_pipeline_runs_every_stage_and_writes_the_report",
    ),
    ".venv/bin/propel test -c configs/math/eval.yaml": (
        "tests/cli/test_cli_grpo.py",
        "test_propel_test_base_vs_trained",
    ),
}
"""Documented commands that run for real, with small overrides (the tiny model, a few tasks or steps), in the named
test (file, function); the function must exist and name the command's config files."""
RUN_HERE = (
    ".venv/bin/propel fit -c configs/grpo/base.yaml -c configs/math/grpo.yaml",
    ".venv/bin/propel fit -c configs/grpo/base.yaml -c configs/code/testsuite.yaml",
    ".venv/bin/propel fit -c configs/grpo/base.yaml -c configs/code/agent.yaml",
    ".venv/bin/propel fit -c configs/grpo/base.yaml -c configs/math/grpo.yaml -c configs/grpo/ddp.yaml",
    ".venv/bin/propel fit -c configs/grpo/base.yaml -c configs/math/grpo.yaml -c configs/grpo/ddp.yaml "
    "--trainer.accelerator=cpu --trainer.devices=2",
    ".venv/bin/propel predict -c configs/math/label.yaml --trainer.strategy=ddp --trainer.devices=2",
)


def test_every_documented_command_runs_somewhere():
    """Each documented command is executed, here or in the named test, not only validated."""
    here = {
        c
        for c in documented_commands()
        if any(k in c for k in ("CACHE_KEY", "propel.pipeline.compare", "--print_config"))
    }
    here |= set(RUN_HERE)  # and a --print_config command runs as written in the validation test above
    assert set(documented_commands()) - here == set(RUN_ELSEWHERE) - here, "a documented command no test runs"
    for command, (path, name) in RUN_ELSEWHERE.items():
        source = (ROOT / path).read_text()
        assert f"def {name}(" in source, (command, path, name)
        for config in re.findall(r"configs/[\w/]+\.yaml", command):
            stem = config.rsplit("/", 1)[-1]
            assert config in source or (path.endswith("e2e.py") and stem in ("sweep.yaml", "demo.yaml")), (
                command,
                config,
            )


@pytest.mark.parametrize("command", RUN_HERE)
def test_documented_code_commands_run_with_small_overrides(command, tiny_model_dir, tmp_path, monkeypatch):
    """The documented training and labeling commands, as written, plus overrides for time: the tiny model, one step of
    2 samples per context, short generations (the GRPO commands read the probe artifact where their config says,
    ``runs/probe/artifact``: one is made there for the tiny model). A run trains a step and checkpoints it; job 2's
    runs log every reward component; DDP commands run as their own processes (Lightning starts the other rank by
    re-running the command line), and 2-rank labeling writes every task once."""
    import subprocess
    import sys

    from propel.cli import main

    argv = [a.replace("configs/", f"{ROOT}/configs/", 1) if a.startswith("configs/") else a for a in _argv(command, {})]
    monkeypatch.chdir(tmp_path)  # the configs write under runs/ and pools/
    ddp = "ddp" in command
    if argv[1] == "predict":
        overrides = [
            f"--model.init_args.generator={tiny_model_dir}",
            "--model.init_args.max_new_tokens=6",
            "--model.init_args.solver.max_new_tokens=4",
            "--model.init_args.solver.n_trials=2",
            "--model.init_args.solver.band=[1,1]",
            "--data.init_args.n_tasks=4",
            "--data.init_args.batch_size=1",
            "--trainer.enable_progress_bar=false",
        ]
        run = subprocess.run(
            [sys.executable, "-m", "propel.cli", *argv[1:], *overrides], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr[-3000:]
        from propel.pools.io import read_pool

        pool = read_pool(tmp_path / "pools" / "math_expression")
        assert len(pool) == 4 == pool["id"].nunique()
        assert {p.name.split("-")[2] for p in (tmp_path / "pools" / "math_expression").glob("part-*")} == {"r0", "r1"}
        return
    overrides = [
        "--trainer.max_steps=1",
        "--trainer.logger=false",
        "--trainer.enable_progress_bar=false",
        f"--model.init_args.model={tiny_model_dir}",
        "--model.init_args.group_size=2",
        "--model.init_args.micro_batch_size=2",
        "--model.init_args.max_new_tokens=8",
        f"--data.init_args.contexts_per_step={2 if ddp else 1}",  # the global batch: a multiple of the ranks
    ]
    if "agent" in command:
        overrides += ["--data.init_args.env.init_args.max_turns=2", "--data.init_args.max_context_tokens=512"]
    if "math/grpo" in command:
        from tests.cli.test_cli_grpo import probe_artifact

        probe_artifact(tmp_path / "runs" / "probe" / "artifact", tiny_model_dir)
        overrides.remove("--model.init_args.micro_batch_size=2")
    if ddp:
        run = subprocess.run(
            [sys.executable, "-m", "propel.cli", *argv[1:], *overrides], capture_output=True, text=True
        )
        assert run.returncode == 0, run.stderr[-3000:]
    else:
        main([*argv[1:], *overrides])
    import torch

    out = (
        tmp_path
        / "runs"
        / {"math/grpo": "grpo", "code/agent": "code_agent", "code/testsuite": "code"}[
            re.search(r"(math/grpo|code/agent|code/testsuite)", command).group(1)
        ]
    )
    ckpt = torch.load(out / "checkpoints" / "last.ckpt", weights_only=False, map_location="cpu")
    assert ckpt["global_step"] == 1
    if "code/" in command:
        curves = json.loads((out / "reward_curves.json").read_text())
        assert {"total", "tests", "pass_rate", "hacked"} <= set(curves) and all(len(v) == 1 for v in curves.values())
