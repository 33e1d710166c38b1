"""Several YAML config files read as one, the way ``propel <subcommand> -c a.yaml -c b.yaml`` reads them.

jsonargparse (``omegaconf+`` mode) is the authority for the command; this is the same composition for code that
needs the merged mapping before a command runs (the pipeline's stages, tests, reports):

- mappings merge key by key, and a later list replaces an earlier one;
- ``key+:`` appends to the list that earlier files gave ``key`` (``trainer.callbacks+:`` adds callbacks to
  ``configs/grpo/base.yaml``'s without repeating them);
- a string naming a ``.yaml`` file relative to the config that holds it is that file's content (a fragment such
  as ``domain: domain.yaml``; jsonargparse reads a class argument given as a path the same way);
- ``${...}`` interpolations are left for the caller to resolve once everything is set.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

from propel.errors import ConfigError

APPEND = "+"
"""Suffix of a key whose list is appended to the earlier files' list."""
FRAGMENT_SUFFIXES = (".yaml", ".yml")


def _inline_fragments(node: Any, folder: Path, seen: tuple[Path, ...]) -> Any:
    """``node`` with every string that names a YAML file under ``folder`` replaced by the file's content."""
    if isinstance(node, str) and node.endswith(FRAGMENT_SUFFIXES) and not Path(node).is_absolute():
        path = (folder / node).resolve()
        if path.is_file():
            if path in seen:
                raise ConfigError(f"config fragment {path} includes itself (through {' -> '.join(map(str, seen))})")
            return _inline_fragments(OmegaConf.to_container(OmegaConf.load(path)), path.parent, (*seen, path))
        return node
    if isinstance(node, dict):
        return {k: _inline_fragments(v, folder, seen) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline_fragments(v, folder, seen) for v in node]
    return node


def inline_fragments(data: dict, path: str | Path) -> dict:
    """``data``, the YAML mapping of the config file ``path``, with the fragments it names inlined."""
    path = Path(path)
    return _inline_fragments(data, path.parent.resolve(), (path.resolve(),))


def _merge(base: DictConfig, layer: dict, where: str = "") -> None:
    """Merge ``layer`` into ``base`` in place: mappings key by key, lists replaced, ``key+`` lists appended."""
    for key, value in layer.items():
        key = str(key)
        if key.endswith(APPEND):
            name = key[: -len(APPEND)]
            earlier = base.get(name)
            if not isinstance(value, list) or not (earlier is None or isinstance(earlier, ListConfig)):
                raise ConfigError(f"config key '{where}{key}': '+' appends a list to a list")
            base[name] = [*(OmegaConf.to_container(earlier) if earlier is not None else []), *value]
        elif isinstance(value, dict) and isinstance(base.get(key), DictConfig):
            _merge(base[key], value, f"{where}{key}.")
        else:
            base[key] = value


def load_config_files(paths: Sequence[str | Path]) -> DictConfig:
    """The files merged in order, fragments inlined and ``+`` appends applied (interpolations unresolved)."""
    merged = OmegaConf.create({})
    for path in map(Path, paths):
        if not path.is_file():
            raise ConfigError(f"config file {str(path)!r} does not exist")
        layer = OmegaConf.to_container(OmegaConf.load(path))
        if not isinstance(layer, dict):
            raise ConfigError(f"config file {str(path)!r} must hold a YAML mapping")
        _merge(merged, _inline_fragments(layer, path.parent.resolve(), (path.resolve(),)))
    return merged


def with_fragments_inlined(args: Sequence[str]) -> list[str]:
    """``args`` with each ``-c FILE`` that names a fragment given as the file's YAML with its fragments inlined (for
    a parser that reads a path only where a class is nested, not as a top-level argument); other arguments as given.
    """
    import yaml

    out, take = [], False
    for arg in args:
        value, prefix = (arg, "") if take else (None, "")
        if not take and arg.startswith("--config="):
            value, prefix = arg[len("--config=") :], "--config="
        take = arg in ("-c", "--config")
        path = Path(value) if value is not None else None
        if path is not None and path.suffix in FRAGMENT_SUFFIXES and path.is_file():
            plain = OmegaConf.to_container(OmegaConf.load(path))
            inlined = _inline_fragments(plain, path.parent.resolve(), (path.resolve(),))
            if inlined != plain:
                arg = prefix + yaml.safe_dump(inlined, sort_keys=False)
        out.append(arg)
    return out


def config_values(argv: list[str]) -> list[tuple[int, str]]:
    """``(index in argv, value)`` of each ``-c FILE`` / ``--config FILE`` / ``--config=FILE``; YAML text given
    inline (a newline or ``: `` in it) is not a file and is left out."""
    out = []
    for i, arg in enumerate(argv):
        if arg in ("-c", "--config") and i + 1 < len(argv):
            out.append((i + 1, argv[i + 1]))
        elif arg.startswith("--config="):
            out.append((i, arg[len("--config=") :]))
    return [(i, value) for i, value in out if "\n" not in value and ": " not in value]
