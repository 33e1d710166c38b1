"""``propel pipeline``: collect+label -> extract -> probe sweep+selection -> GRPO -> evaluation -> report."""
