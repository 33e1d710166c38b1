"""The shipped configs by name from any folder (``-c grpo/base``), and ``propel configs`` copying them out to edit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from propel.cli import main
from propel.paths import shipped_configs

PROPEL = [sys.executable, "-m", "propel.cli"]


def _main(capsys, *args):
    with pytest.raises(SystemExit) as exc:
        main(list(args))
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_configs_copies_every_shipped_config_and_refuses_an_existing_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main(["configs"])  # ./configs by default
    shipped = sorted(p.relative_to(shipped_configs()) for p in shipped_configs().rglob("*.yaml"))
    copied = sorted(p.relative_to(tmp_path / "configs") for p in (tmp_path / "configs").rglob("*"))
    assert copied == sorted({*shipped, *(d for p in shipped for d in p.parents if d != Path("."))})
    assert (tmp_path / "configs/math/domain.yaml").read_text() == (shipped_configs() / "math/domain.yaml").read_text()
    assert f"copied {len(shipped)} configs into configs/" in capsys.readouterr().out
    edited = tmp_path / "configs/grpo/base.yaml"
    edited.write_text("trainer: {max_steps: 3}\n")
    (tmp_path / "configs/mine.yaml").write_text("seed_everything: 1\n")
    code, _, err = _main(capsys, "configs")
    assert code == 2 and "configs exists; pass --force" in err and edited.read_text() == "trainer: {max_steps: 3}\n"
    main(["configs", "--force"])
    assert edited.read_text() == (shipped_configs() / "grpo/base.yaml").read_text()
    assert (tmp_path / "configs/mine.yaml").is_file()  # --force replaces the shipped files, keeps the user's


def test_shipped_configs_by_name_and_copied_ones_by_path_from_an_empty_folder(tmp_path):
    """An installed package has no configs/ folder beside the user: names find the shipped files, whose fragments
    (``domain: domain.yaml``) resolve beside them; a copied config (its fragment beside it) runs by path."""
    main(["configs", str(tmp_path / "mine")])
    domain = tmp_path / "mine/math/domain.yaml"
    domain.write_text(domain.read_text().replace("lenient_expression: true", "lenient_expression: false"))
    args = ["fit", "-c", "grpo/base", "-c", "mine/math/grpo.yaml", "--print_config"]
    out = subprocess.run([*PROPEL, *args], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    for needle in ("propel.lit_modules.grpo.GRPOModule", "default_root_dir: runs/grpo", "lenient_expression: false"):
        assert needle in out.stdout, needle


def test_a_config_that_is_neither_a_file_nor_a_shipped_name_is_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = _main(capsys, "fit", "-c", "grpo/bsae")
    assert code == 2 and "config file does not exist: grpo/bsae (neither a file nor a shipped config" in err
