"""The ``propel`` command: LightningCLI (fit / validate / test / predict) over YAML configs in omegaconf mode, plus
``propel probe`` (the probe job) and ``propel pipeline`` (every PROPEL stage in order)."""

from __future__ import annotations

import sys

from propel.errors import PropelError
from propel.pipeline.lightning_cli import PropelCLI

__all__ = ["PropelCLI", "main"]


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
        if argv[:1] == ["probe"]:
            from propel.pipeline.probe_job import main as probe_main

            probe_main(argv[1:])
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
