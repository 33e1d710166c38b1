"""Jobs with a subcommand of their own beyond Lightning's: ``probe`` (``propel probe``, the probe sweep job)."""
