"""Config files read as plain data, for tests that check what a shipped YAML (or several, composed) asks for before
a command builds it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from omegaconf import OmegaConf

from propel.cli.config_files import load_config_files


def read_config_files(paths: Sequence[str | Path]) -> dict:
    """``load_config_files`` as plain dicts and lists (``${...}`` left for the command to resolve): what a test
    edits and hands back with ``-c``."""
    return OmegaConf.to_container(load_config_files(paths))
