"""Compose a stage's config from the templates in ``configs/``: merge the files, set keys, resolve ``${...}``.

The files merge as ``propel <subcommand> -c a.yaml -c b.yaml`` merges them (``propel.cli.config_files``: mappings
merge, a later list replaces an earlier one, ``key+:`` appends, fragments are inlined). Keys are set with omegaconf:
a dotted key (``model.init_args.solver.n_trials``, ``trainer.callbacks[0].init_args.every_n_train_steps``) or a key
whose mapping value is merged over the template's. Interpolations are resolved after every key is set, as the
command's ``omegaconf+`` mode resolves them after every file and flag, so a template's ``${...}`` follows what the
pipeline set.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from propel.cli.config_files import load_config_files
from propel.errors import ConfigError


def load(paths: Sequence[str | Path], field: str) -> DictConfig:
    """The template files merged in order as the command merges them (``field`` names them in errors)."""
    if not paths:
        raise ConfigError(f"pipeline config key '{field}': name at least one template config file")
    try:
        return load_config_files(paths)
    except ConfigError as err:
        raise ConfigError(f"pipeline config key '{field}': {err}") from None


def set_keys(cfg: DictConfig, values: Mapping[str, Any], field: str) -> None:
    """Set each (dotted) key; a mapping value is merged over what is there, any other value replaces it."""
    for key, value in values.items():
        try:
            OmegaConf.update(cfg, str(key), value, merge=True)
        except (OmegaConfBaseException, ValueError, IndexError, KeyError) as err:
            raise ConfigError(f"pipeline config key '{field}.{key}': {str(err).splitlines()[0]}") from None


def entries(cfg: DictConfig, section: str, class_name: str) -> Iterator[DictConfig]:
    """The ``class_path``/``init_args`` entries of a list or single entry at ``section`` (e.g. ``trainer.callbacks``)
    whose class is ``class_name`` (the class_path's last part, so short and full paths both match)."""
    node = OmegaConf.select(cfg, section)
    items = node if isinstance(node, ListConfig) else [node] if isinstance(node, DictConfig) else []
    for item in items:
        if isinstance(item, DictConfig) and str(item.get("class_path", "")).rsplit(".", 1)[-1] == class_name:
            if item.get("init_args") is None:
                item.init_args = {}
            yield item


def set_init_args(cfg: DictConfig, section: str, class_name: str, **values: Any) -> int:
    """Set ``init_args`` keys of every ``class_name`` entry at ``section``; returns how many entries there were."""
    found = 0
    for item in entries(cfg, section, class_name):
        for key, value in values.items():
            item.init_args[key] = value
        found += 1
    return found


def resolved(cfg: DictConfig, field: str) -> dict:
    """Plain containers with every interpolation resolved: the standalone config a stage writes and runs."""
    try:
        return OmegaConf.to_container(cfg, resolve=True)
    except OmegaConfBaseException as err:
        raise ConfigError(f"pipeline config key '{field}': {str(err).splitlines()[0]}") from None
