"""``python -m propel.cli``: the ``propel`` command (Lightning's DDP launcher re-runs it this way for every rank)."""

from propel.cli.main import main

main()
