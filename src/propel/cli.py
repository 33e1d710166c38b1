"""The ``propel`` command: LightningCLI (fit / validate / test / predict) over YAML configs in omegaconf mode."""

from __future__ import annotations

import sys

from lightning.pytorch import LightningDataModule, LightningModule
from lightning.pytorch.cli import LightningCLI

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
