"""propel: PyTorch Lightning trainers for reinforcement learning on language models."""

import propel.python_ast  # noqa: F401  (on an affected CPython, every ast.parse in the process takes one lock)

__version__ = "0.1.0"
