"""Which reward component steers the policy: each one's share of the advantage variance, step by step, in the run
folder, with a warning when one carries nearly all of it.

``GRPOModule`` measures every step on the global batch (``RolloutState.scoring``: the shares of
``propel.losses.advantage_shares``, the unscorable rate and the skipped groups) and logs it to W&B
(``train/reward/<name>/adv_share``, ``train/rewards/unscorable_rate``, ``train/rewards/skipped_groups``). This
callback writes the same figures to ``reward_components.csv`` and watches them: a component whose mean share over the
last ``window`` steps is at least ``threshold`` is, in practice, the whole reward. The others barely move the policy
whatever their weights say (a format term that is all the completions of a prompt ever differ on, a content term that
never differs between them), and a combined reward whose one part carries the gradient is how a policy learns the
cheap part alone. The warning comes once per component and run.
"""

from __future__ import annotations

import csv
import logging
import os
from collections import deque

import lightning.pytorch as pl

from propel.errors import ConfigError
from propel.lit_modules.state import RolloutPublisher

log = logging.getLogger(__name__)

FILE = "reward_components.csv"


class RewardComponentMonitor(pl.Callback):
    """After every training step, append the step's shares, unscorable rate and skipped groups to
    ``<dirpath>/reward_components.csv`` (rank 0) and warn when one component dominates.

    Args:
        dirpath: the run folder (None: the trainer's ``default_root_dir``).
        window: steps (with reward variance) the mean share is taken over before any warning.
        threshold: mean share at or above which a component is said to carry the advantages.
    """

    def __init__(self, dirpath: str | None = None, window: int = 20, threshold: float = 0.95) -> None:
        if window < 1 or not 0.5 < threshold <= 1.0:
            raise ConfigError(f"RewardComponentMonitor needs window >= 1 and 0.5 < threshold <= 1, got {window}, "
                              f"{threshold}")  # fmt: skip
        self.dirpath, self.window, self.threshold = dirpath, window, threshold
        self.recent: deque[dict[str, float]] = deque(maxlen=window)
        self.warned: list[str] = []
        self.columns: list[str] | None = None
        self._last_state = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not isinstance(pl_module, RolloutPublisher):
            raise TypeError(
                f"RewardComponentMonitor reads the module's `rollout_state`; {type(pl_module).__name__} has none"
            )
        state = pl_module.rollout_state
        if state is None or state.scoring is None or state is self._last_state:
            return
        self._last_state = state
        scoring, weights = state.scoring, state.rewards.weights if state.rewards is not None else {}
        if self.columns is None:
            paying = [k for k, w in weights.items() if w != 0] or list(weights) or sorted(scoring.shares)
            self.columns = ["step", "unscorable_rate", "skipped_groups", *(f"share_{k}" for k in paying)]
        if trainer.is_global_zero:
            self._write(trainer, [state.step, scoring.unscorable_rate, scoring.skipped_groups], scoring.shares)
        if scoring.shares:
            self.recent.append(dict(scoring.shares))
        self._check(len(self.columns) - 3, trainer.is_global_zero)

    def _write(self, trainer, head: list, shares: dict[str, float]) -> None:
        folder = self.dirpath or trainer.default_root_dir
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, FILE)
        fresh = not os.path.exists(path)
        row = [*head, *(shares.get(c.removeprefix("share_"), "") for c in self.columns[3:])]
        with open(path, "a", newline="") as f:
            out = csv.writer(f)
            if fresh:
                out.writerow(self.columns)
            out.writerow(row)

    def _check(self, paying: int, speak: bool) -> None:
        """Warn (rank 0, once per component) when one component's mean share over a full window reaches the
        threshold; a reward with one paying component has nothing to compare."""
        if paying < 2 or len(self.recent) < self.window:
            return
        names = {k for shares in self.recent for k in shares}
        for name in sorted(names - set(self.warned)):
            mean = sum(shares.get(name, 0.0) for shares in self.recent) / len(self.recent)
            if mean < self.threshold:
                continue
            self.warned.append(name)
            if speak:
                log.warning(
                    "propel: reward component %r carries a %.2f share of the advantage variance over the last %d "
                    "steps (warned at %.2f): the other components barely move the policy, whatever their weights; "
                    "see %s in the run folder",
                    name, mean, self.window, self.threshold, FILE,
                )  # fmt: skip

    def state_dict(self) -> dict:
        """The window, the components already warned about and the CSV's columns (a resumed run goes on as one)."""
        return {"recent": list(self.recent), "warned": list(self.warned), "columns": self.columns}

    def load_state_dict(self, state_dict: dict) -> None:
        self.recent = deque(state_dict.get("recent", []), maxlen=self.window)
        self.warned = list(state_dict.get("warned", []))
        self.columns = state_dict.get("columns")
