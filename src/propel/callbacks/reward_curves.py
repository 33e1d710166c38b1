"""Per-component reward curves as PNGs: one line per reward component (mean over the step's samples) by step."""

from __future__ import annotations

import json
import os

import lightning.pytorch as pl

from propel.lit_modules.state import RolloutPublisher


class RewardCurves(pl.Callback):
    """After every optimizer step, record the mean of the total reward and of each component; at the end of fitting
    write ``reward_curves.json`` and one PNG per component (``reward_<name>.png``) into ``dirpath``.

    Args:
        dirpath: the run folder the files go to.
    """

    def __init__(self, dirpath: str) -> None:
        self.dirpath = dirpath
        self.history: dict[str, list[tuple[int, float]]] = {}
        self._last_state = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not isinstance(pl_module, RolloutPublisher):
            raise TypeError(f"RewardCurves reads the module's `rollout_state`; {type(pl_module).__name__} has none")
        state = pl_module.rollout_state
        if state is None or state.rewards is None or state is self._last_state:
            return
        self._last_state = state
        parts = {"total": state.rewards.total, **state.rewards.components}
        for name, value in parts.items():  # x: the batch's index (a batch with no optimizer step keeps its step)
            self.history.setdefault(name, []).append((batch_idx, float(value.float().mean())))

    def on_train_end(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero or not self.history:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        os.makedirs(self.dirpath, exist_ok=True)
        with open(os.path.join(self.dirpath, "reward_curves.json"), "w") as f:
            json.dump(self.history, f, indent=1)
        for name, points in self.history.items():
            fig, ax = plt.subplots(figsize=(5, 3))
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
            ax.set_xlabel("training batch")
            ax.set_ylabel(f"mean {name}")
            ax.set_title(f"reward component: {name}")
            fig.tight_layout()
            fig.savefig(os.path.join(self.dirpath, f"reward_{name.replace('/', '_')}.png"), dpi=80)
            plt.close(fig)
