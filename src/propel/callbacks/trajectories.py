"""Keep every step's rollouts on disk as Parquet (``step-000042.parquet``): what the policy did, token for token."""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl

from propel.lit_modules.state import RolloutPublisher
from propel.rollouts.trajectories import write_trajectories


class TrajectoryWriter(pl.Callback):
    """Writes the latest step's samples (``rollout_state``) after every ``every_n_steps``-th step.

    Args:
        dirpath: folder of the files (created); one file per step, named by the step the rollouts were sampled at.
        every_n_steps: write every N steps (1: all).
    """

    def __init__(self, dirpath: str = "runs/trajectories", every_n_steps: int = 1) -> None:
        if every_n_steps < 1:
            raise ValueError(f"every_n_steps must be >= 1, got {every_n_steps}")
        self.dirpath, self.every_n_steps = Path(dirpath), every_n_steps

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not isinstance(pl_module, RolloutPublisher) or pl_module.rollout_state is None:
            return
        state = pl_module.rollout_state
        if state.step % self.every_n_steps or not trainer.is_global_zero:
            return
        write_trajectories(state.samples, self.dirpath / f"step-{state.step:06d}.parquet")
