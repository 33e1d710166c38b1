"""Several config files read as one: ``propel.cli.config_files`` composes them as the command does (``+`` appends,
fragments inlined, lists replaced), so the pipeline and scripts see what ``propel <subcommand> -c a -c b`` runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from propel.cli.config_files import load_config_files
from propel.cli.lightning_cli import resolve_lightning
from propel.errors import ConfigError
from propel.testing.plain_configs import read_config_files

ROOT = Path(__file__).resolve().parents[2]


def _write(folder: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)


def test_append_replace_and_fragments(tmp_path):
    _write(
        tmp_path,
        {
            "a.yaml": "trainer: {callbacks: [{class_path: A}], max_steps: 3}\nmodel: {init_args: {rewards: [r1]}}\n",
            "sub/b.yaml": "trainer: {callbacks+: [{class_path: B}]}\n"
            "model: {init_args: {rewards: [r2], domain: d.yaml}}\n",
            "sub/d.yaml": "class_path: D\ninit_args: {x: 1}\n",
        },
    )
    cfg = read_config_files([tmp_path / "a.yaml", tmp_path / "sub/b.yaml"])
    assert [c["class_path"] for c in cfg["trainer"]["callbacks"]] == ["A", "B"]  # appended
    assert cfg["trainer"]["max_steps"] == 3  # mappings merge
    assert cfg["model"]["init_args"]["rewards"] == ["r2"]  # a list replaces
    assert cfg["model"]["init_args"]["domain"] == {"class_path": "D", "init_args": {"x": 1}}  # beside b.yaml


def test_bad_compositions_fail_with_one_line(tmp_path):
    _write(tmp_path, {"loop.yaml": "x: loop.yaml\n", "bad.yaml": "trainer: {max_steps+: [1]}\n", "list.yaml": "- 1\n"})
    with pytest.raises(ConfigError, match="includes itself"):
        load_config_files([tmp_path / "loop.yaml"])
    _write(tmp_path, {"steps.yaml": "trainer: {max_steps: 3}\n"})
    with pytest.raises(ConfigError, match="appends a list to a list"):
        load_config_files([tmp_path / "steps.yaml", tmp_path / "bad.yaml"])
    with pytest.raises(ConfigError, match="must hold a YAML mapping"):
        load_config_files([tmp_path / "list.yaml"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_config_files([tmp_path / "nope.yaml"])


@pytest.mark.parametrize(
    "files",
    [
        ["configs/grpo/base.yaml", "configs/math/grpo.yaml", "configs/math/mining.yaml"],
        ["configs/grpo/base.yaml", "configs/math/grpo.yaml", "configs/math/grpo_sil.yaml"],
        ["configs/grpo/base.yaml", "configs/agent/distill.yaml"],
    ],
)
def test_the_composition_is_the_commands(files):
    """What the composition holds is what the command runs: same callbacks in the same order, same root, same
    domain (inlined here, read from the path there)."""
    paths = [ROOT / f for f in files]
    ours = OmegaConf.to_container(load_config_files(paths), resolve=True)
    theirs = resolve_lightning("fit", read_config_files(paths))
    assert [c["class_path"] for c in ours["trainer"]["callbacks"]] == [
        c["class_path"] for c in theirs["trainer"]["callbacks"]
    ]
    dirs = [c["init_args"].get("dirpath") for c in theirs["trainer"]["callbacks"] if "init_args" in c]
    root = ours["trainer"]["default_root_dir"]
    assert theirs["trainer"]["default_root_dir"] == root and f"{root}/checkpoints" in dirs
    assert ours["model"]["class_path"] == theirs["model"]["class_path"]
