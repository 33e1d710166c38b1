"""Every ``propel`` command in README.md's code blocks is a valid invocation as written: each goes through the real
CLI (``--print_config``: every key and value validated, every default filled in), and the probe-on-cached-features
command runs for real with its placeholders pointing at synthetic features. A README command this test does not
know fails it, so a new one cannot go unchecked."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PREFIXES = (".venv/bin/propel ", ".venv/bin/python -m propel.")


def readme_commands() -> list[str]:
    """The propel commands of README.md's bash blocks (continuation lines joined, trailing comments dropped)."""
    text = (ROOT / "README.md").read_text()
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith(PREFIXES):
                commands.append(" ".join(line.split()))
    return commands


def _argv(command: str, subs: dict[str, str]) -> list[str]:
    for name, value in subs.items():
        command = command.replace(name, value)
    return shlex.split(command)


def test_the_readme_has_the_commands_this_test_checks():
    commands = readme_commands()
    subcommands = {shlex.split(c)[1] if "bin/propel" in c else shlex.split(c)[2] for c in commands}
    assert subcommands == {"predict", "probe", "fit", "test", "pipeline", "propel.pipeline.compare"}, commands


def test_every_readme_propel_command_validates_as_written(capsys):
    from propel.cli import main

    checked = 0
    for command in readme_commands():
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


def test_readme_probe_fit_command_runs_with_its_placeholders_filled(tmp_path, monkeypatch):
    """The one README command that needs files made elsewhere: ``CACHE_KEY`` and the pool point at synthetic data."""
    from propel.cli import main
    from propel.probes.artifact import ProbeArtifact
    from propel.probes.synthetic import write_synthetic

    (command,) = [c for c in readme_commands() if "configs/probe/fit.yaml" in c]
    feats, labels = write_synthetic(tmp_path / "data", n=300, keys=("layer12/mean_full",), signal=(3.0,))
    argv = _argv(command, {"runs/probe/cache/CACHE_KEY": str(feats), "pools/math_expression": str(labels)})
    argv = [a.replace("configs/", f"{ROOT}/configs/", 1) if a.startswith("configs/") else a for a in argv]
    monkeypatch.chdir(tmp_path)
    main([*argv[1:], "--trainer.max_epochs=2", "--trainer.logger=false", "--trainer.enable_checkpointing=false"])
    artifact = ProbeArtifact.load(tmp_path / "runs" / "probe" / "artifact")
    assert artifact.layer == 12 and artifact.pooling == "mean_full"


def test_readme_compare_command_runs(tmp_path):
    import subprocess
    import sys

    (command,) = [c for c in readme_commands() if "propel.pipeline.compare" in c]
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
    import subprocess
    import sys

    code = (
        "import sys; from propel.cli import main\n"
        f"try:\n    main([{flag!r}])\nexcept SystemExit as e:\n    assert e.code == 0\n"
        "heavy = [m for m in ('torch', 'lightning', 'transformers', 'vllm') if m in sys.modules]\n"
        "assert not heavy, heavy"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0, out.stderr[-2000:]
    if flag == "--help":
        from propel.cli import SUBCOMMANDS

        for name, line in SUBCOMMANDS.items():
            assert f"  {name}" in out.stdout and line in out.stdout
    else:
        assert re.fullmatch(r"propel \d+\.\d+\.\d+\S*\n", out.stdout)
