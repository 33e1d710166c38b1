"""Side computations that must not move the training RNG streams (mining, evaluation samples inside a fit)."""

from __future__ import annotations

import contextlib

import torch


def cuda_devices(device: torch.device) -> list[int]:
    """The CUDA device indices whose RNG a fork must save and restore (none on CPU)."""
    if device.type != "cuda":
        return []
    return [device.index if device.index is not None else torch.cuda.current_device()]


@contextlib.contextmanager
def forked_rng(device: torch.device, seed: int):
    """Run the block seeded with ``seed`` (CPU and the device's CUDA generator), then restore the streams."""
    with torch.random.fork_rng(devices=cuda_devices(device)):
        torch.manual_seed(seed)  # seeds the CUDA generators too
        yield
