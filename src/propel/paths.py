"""Where propel keeps converted models and other caches (override with ``PROPEL_CACHE``), and where its shipped
configs are (inside the package, so an installed wheel has them: ``propel fit -c grpo/base -c math/grpo``)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Root of propel's on-disk cache; created on first use."""
    root = os.environ.get("PROPEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "propel"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path


def shipped_configs() -> Path:
    """The folder of the configs that ship with propel (``configs/`` of a checkout is a link to it)."""
    return Path(__file__).resolve().parent / "configs"


def config_path(name: str | os.PathLike) -> Path:
    """A config file by path or by name: ``name`` itself when it is a file, else the shipped config it names
    (``grpo/base``, ``grpo/base.yaml`` or ``configs/grpo/base.yaml``, from any folder); ``name`` unchanged when
    neither exists (the caller reports it)."""
    given = Path(name)
    if given.is_file() or given.is_absolute():
        return given
    rel = given.as_posix().removeprefix("./").removeprefix("configs/")
    for candidate in (rel, rel + ".yaml"):
        path = shipped_configs() / candidate
        if path.is_file():
            return path
    return given
