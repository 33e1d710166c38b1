"""The ``propel`` command: LightningCLI (fit / validate / test / predict) over YAML configs in omegaconf mode."""

from __future__ import annotations

import sys

from jsonargparse import Namespace
from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI
from lightning.pytorch.utilities import rank_zero_warn

from propel.errors import PropelError

DEFAULT_LOGGER = {
    "class_path": "propel.loggers.PropelWandbLogger",
    "init_args": {"project": "propel", "save_dir": "runs"},
}


class PropelCLI(LightningCLI):
    """LightningCLI with propel's defaults: class paths for model and data, W&B logger, omegaconf interpolation."""

    def __init__(self, args=None, run: bool = True):
        super().__init__(
            LightningModule,
            LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            parser_kwargs={"parser_mode": "omegaconf", "exit_on_error": False},
            trainer_defaults={"logger": DEFAULT_LOGGER},
            save_config_kwargs={"overwrite": True},
            auto_configure_optimizers=False,
            args=args,
            run=run,
        )

    def _parse_ckpt_path(self) -> None:
        """Lightning puts a checkpoint's saved hyperparameters over the config on ``--ckpt_path``, so a changed
        ``--model.init_args.lr`` would be ignored without a word (open upstream): name every value it replaces."""
        sub = self.config.get("subcommand")
        before = _flat(self.config[sub].get("model")) if sub else {}
        super()._parse_ckpt_path()
        if not sub:
            return
        after = _flat(self.config[sub].get("model"))
        changed = [
            f"model.{k}: {before[k]!r} -> {after[k]!r}" for k in sorted(before) if k in after and before[k] != after[k]
        ]
        if changed:
            rank_zero_warn(
                f"resuming from {self.config[sub].get('ckpt_path')}: the checkpoint's hyperparameters replace the "
                f"config's ({'; '.join(changed)}). A resumed run continues as it was; start a new run to change them."
            )


def _flat(node, prefix: str = "") -> dict:
    """``{"init_args.lr": 1e-4, ...}`` from a (nested) jsonargparse Namespace or dict."""
    items = vars(node) if isinstance(node, Namespace) else node
    if not isinstance(items, dict):
        return {prefix.rstrip("."): node} if prefix else {}
    out = {}
    for key, value in items.items():
        if str(key).startswith("_"):
            continue
        if isinstance(value, (dict, Namespace)):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def _one_line(message: str) -> str:
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    return " | ".join(lines[:3]) if lines else "invalid arguments"


def main(args=None) -> None:
    """Entry point of the ``propel`` console script."""
    from jsonargparse import ArgumentError

    argv = sys.argv[1:] if args is None else list(args)
    try:
        if argv[:1] == ["pipeline"]:
            from propel.pipeline.run import main as pipeline_main

            pipeline_main(argv[1:])
            return
        PropelCLI(args=args)
    except ArgumentError as err:
        print(f"propel: config error: {_one_line(err)}  (see `propel <subcommand> --help`)", file=sys.stderr)
        raise SystemExit(2) from None
    except PropelError as err:
        print(f"propel: error: {_one_line(err)}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    main()
