"""propel's LightningCLI (fit / validate / test / predict over YAML in omegaconf+ mode), and running it in-process.

The pipeline runs its Lightning stages through it: the very parser a user runs by hand
(``propel <subcommand> -c config.yaml``). In ``omegaconf+`` mode ``${...}`` is resolved once every file and flag is
merged, so a base file's ``${trainer.default_root_dir}/checkpoints`` follows the root an overlay or a flag sets.
"""

from __future__ import annotations

import io
import sys
import warnings
from contextlib import redirect_stdout
from pathlib import Path

import yaml
from jsonargparse import ArgumentError, Namespace, set_parsing_settings
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.utilities import rank_zero_warn

from propel.cli.errors import explain, init_error
from propel.cli.quiet import quiet_dependencies
from propel.errors import ConfigError

DEFAULT_LOGGER = {
    "class_path": "propel.loggers.PropelWandbLogger",
    "init_args": {"project": "propel", "save_dir": "runs"},
}


class PropelCLI(LightningCLI):
    """LightningCLI with propel's defaults: class paths for model and data, W&B logger, omegaconf interpolation."""

    def __init__(self, args=None, run: bool = True):
        quiet_dependencies()
        # Configs write ${trainer.x} from the config's root; under a subcommand the root is ``fit.``: jsonargparse
        # rewrites such absolute interpolations as relative ones when it loads a file.
        set_parsing_settings(omegaconf_absolute_to_relative_paths=True)
        super().__init__(
            LightningModule,
            LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            parser_kwargs={"parser_mode": "omegaconf+", "exit_on_error": False},
            trainer_defaults={"logger": DEFAULT_LOGGER},
            save_config_kwargs={"overwrite": True},
            auto_configure_optimizers=False,
            args=args,
            run=run,
        )

    def parse_arguments(self, parser, args) -> None:
        """Parse as LightningCLI does; a bad key or value raises a one-line ``ConfigError`` with jsonargparse's
        innermost cause, the full key and the closest accepted key."""
        try:
            super().parse_arguments(parser, args)
        except ArgumentError as err:
            raise ConfigError(explain(str(err), lambda: self._known_keys(args))) from None

    def instantiate_classes(self) -> None:
        """Build the classes as LightningCLI does; a value a class refuses in ``__init__`` (``group_size: 1``)
        raises a one-line ``ConfigError`` naming the key instead of jsonargparse's nested traceback."""
        try:
            super().instantiate_classes()
        except (ValueError, TypeError) as err:
            raise ConfigError(init_error(str(err))) from None

    def _known_keys(self, args) -> list[str]:
        """The keys of the subcommand being parsed (``trainer.max_steps``, ``model``, ...), for suggestions."""
        argv = sys.argv[1:] if args is None else list(args) if isinstance(args, (list, tuple)) else []
        parsers = getattr(self, "_subcommand_parsers", {})
        parser = next((parsers[a] for a in argv if a in parsers), self.parser)
        try:
            return list(parser.get_defaults().keys())
        except Exception:  # noqa: BLE001 (suggestions only)
            return []

    def _parse_ckpt_path(self) -> None:
        """Lightning puts a checkpoint's saved hyperparameters over the config on ``--ckpt_path``, so a changed
        ``--model.init_args.lr`` would be ignored without a word (open upstream): name every value it replaces."""
        sub = self.config.get("subcommand")
        before = flat_keys(self.config[sub].get("model")) if sub else {}
        super()._parse_ckpt_path()
        if not sub:
            return
        after = flat_keys(self.config[sub].get("model"))
        changed = [
            f"model.{k}: {before[k]!r} -> {after[k]!r}" for k in sorted(before) if k in after and before[k] != after[k]
        ]
        if changed:
            rank_zero_warn(
                f"resuming from {self.config[sub].get('ckpt_path')}: the checkpoint's hyperparameters replace the "
                f"config's ({'; '.join(changed)}). A resumed run continues as it was; start a new run to change them."
            )


def flat_keys(node, prefix: str = "") -> dict:
    """``{"init_args.lr": 1e-4, "callbacks.0.init_args.dirpath": ...}`` from nested Namespaces, dicts and lists of
    them (keys starting with ``_`` are jsonargparse's own and skipped)."""
    if isinstance(node, Namespace):
        node = vars(node)
    if isinstance(node, dict):
        items = [(k, v) for k, v in node.items() if not str(k).startswith("_")]
    elif isinstance(node, (list, tuple)) and any(isinstance(v, (dict, list, tuple, Namespace)) for v in node):
        items = list(enumerate(node))
    else:
        return {prefix.rstrip("."): list(node) if isinstance(node, tuple) else node} if prefix else {}
    out = {}
    for key, value in items:
        out.update(flat_keys(value, f"{prefix}{key}."))
    return out


def _cli(args: list[str]) -> None:
    with warnings.catch_warnings():  # the pipeline's own argv is not this stage's: that is intended here
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
        PropelCLI(args=args)


def run_lightning(subcommand: str, config: Path, extra_args: list[str] | None = None) -> None:
    """``propel <subcommand> -c config [extra_args]`` in this process."""
    _cli([subcommand, "-c", str(config), *(extra_args or [])])


def resolve_lightning(subcommand: str, config: dict) -> dict:
    """The complete config ``propel <subcommand>`` would run ``config`` with (every default filled in), as its
    ``--print_config`` prints it. A bad key or value raises the CLI's one-line ``ConfigError``."""
    return resolve_lightning_args(subcommand, ["-c", yaml.safe_dump(config, sort_keys=False)])


def resolve_lightning_args(subcommand: str, args: list[str]) -> dict:
    """``resolve_lightning`` for command-line arguments (``-c`` files and flags, composed as the run composes them)."""
    out = io.StringIO()
    with redirect_stdout(out):
        try:
            _cli([subcommand, *args, "--print_config"])
        except SystemExit as done:
            if done.code not in (0, None):
                raise
    return yaml.safe_load(out.getvalue())
