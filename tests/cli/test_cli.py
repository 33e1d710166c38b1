"""The ``propel`` command: help, config printing, one-line config errors."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROPEL = [sys.executable, "-m", "propel.cli"]


def _run(*args, cwd=None):
    return subprocess.run([*PROPEL, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def test_help_lists_subcommands():
    out = _run("--help")
    assert out.returncode == 0
    for sub in ("fit", "validate", "test", "predict"):
        assert sub in out.stdout


def _main(capsys, *args):
    from propel.cli import main

    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_fit_help(capsys):
    code, out, _ = _main(capsys, "fit", "--help")
    assert code == 0 and "--trainer.max_steps" in out


@pytest.mark.parametrize(
    ("yaml_text", "key"),
    [
        ("trainer:\n  max_epochs: abc\n", "trainer.max_epochs"),
        ("trainer:\n  no_such_option: 1\n", "no_such_option"),
        ("model:\n  class_path: propel.nope.Missing\n", "model"),
    ],
)
def test_bad_config_is_one_line_naming_the_key(tmp_path, capsys, yaml_text, key):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(yaml_text)
    code, _, err = _main(capsys, "fit", "-c", str(cfg))
    assert code == 2
    lines = [line for line in err.splitlines() if line.startswith("propel:")]
    assert len(lines) == 1 and key in lines[0], err[-2000:]
    assert "Traceback" not in err


def test_missing_config_file(tmp_path, capsys):
    code, _, err = _main(capsys, "fit", "-c", str(tmp_path / "missing.yaml"))
    assert code == 2 and "does not exist" in err


def test_probe_route_help_and_one_line_errors(capsys):
    code, out, _ = _main(capsys, "probe", "--help")
    assert code == 0 and "--sweep.split" in out and "--rvp.mode" in out
    code, _, err = _main(capsys, "probe", "-c", "configs/probe/sweep.yaml", "--sweep.splitz", "x")
    lines = [line for line in err.splitlines() if line.startswith("propel:")]
    assert code == 2 and len(lines) == 1 and "splitz" in lines[0], err[-2000:]
    code, _, err = _main(capsys, "probe", "-c", "configs/probe/sweep.yaml", "--poolings", "[nope]")
    assert code == 2 and "nope" in err and "Traceback" not in err
