"""propel: PyTorch Lightning trainers for reinforcement learning on language models."""

__version__ = "0.1.0"
