"""The ``propel`` command and what every subcommand shares: LightningCLI over YAML in omegaconf+ mode
(``lightning_cli``), several config files read as one (``config_files``), config keys checked from the classes'
source before anything heavy loads (``static_keys``; short class names found there: ``class_names``),
jsonargparse's nested errors as one line (``errors``), dependencies kept quiet (``quiet``), stopping on a signal and
saying what was written (``stops``), ``fit``'s default resume and its settings check (``resume``)."""

from propel.cli.main import main

__all__ = ["main"]
