"""RewardFloorCheck: during GRPO, check that valid samples sit above the invalid floor, as the gate intends.

A hard-gated probe reward pays invalid tasks a fixed floor. If the probe's logits on valid tasks sit below it (a
floor of -1 with valid logits around -2), being invalid would pay better; the gate lifts such valid rewards to the
floor + a margin, so validity still wins, but the reward then cannot rank those tasks. The default floor
(``propel.probes.gate.default_floor``) keeps them rare; this callback catches the case it cannot (an explicit
the gate's ``floor`` set too high, on-policy tasks drifting below the probe's pool range): it fails when more than
``max_below`` of the valid samples sit under the floor (+ margin), whatever their mean, on the first step (the base
policy's samples) and every ``every_n_steps`` steps after. ``RVPSelection`` runs the same check on its fixed
base-policy sample at fit start.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from lightning.pytorch import Callback
from lightning.pytorch.utilities import rank_zero_warn

from propel.errors import ConfigError
from propel.probes.gate import MAX_BELOW, FloorCheck, check_floor

ACTIONS = ("warn", "stop")


def check_action(action: str) -> str:
    """Validate a floor-check action: ``warn`` (log a warning) or ``stop`` (warn, then stop training)."""
    if action not in ACTIONS:
        raise ConfigError(f"action must be one of {ACTIONS}, got {action!r}")
    return action


def act_on_floor(check: FloorCheck, name: str, action: str, trainer) -> None:
    """Warn (and with ``stop``, ask the trainer to stop) when ``check`` failed."""
    if check.ok:
        return
    rank_zero_warn(check.message(name) + (" (stopping training)" if action == "stop" else ""))
    if action == "stop":
        trainer.should_stop = True


class RewardFloorCheck(Callback):
    """Measure the share of valid samples under each floored reward component's floor on the step's rollouts.

    Reads the module's reward components (``pl_module.reward``, a ``CombinedReward``) for their ``floor`` (e.g.
    ``ProbeReward.floor``, ``SolverInLoopReward.floor``) and the step's ``rollout_state`` for their values.

    Args:
        every_n_steps: check the first step and then every this many steps.
        action: ``warn`` (default) or ``stop`` (warn, then end training) when too many valid samples score below
            the floor.
        components: names of the components to check; None checks every component that has a floor.
        log_prefix: metric prefix (``<prefix>/<component>/mean_valid``, ``.../floor``, ``.../below``).
        max_below: largest share of valid samples under a component's floor (+ its ``floor_margin``) that passes.
    """

    def __init__(
        self,
        every_n_steps: int = 10,
        action: str = "warn",
        components: Sequence[str] | None = None,
        log_prefix: str = "reward_floor",
        max_below: float = MAX_BELOW,
    ) -> None:
        if every_n_steps < 1:
            raise ConfigError(f"every_n_steps must be >= 1, got {every_n_steps}")
        if not 0.0 <= max_below < 1.0:
            raise ConfigError(f"max_below must be in [0, 1), got {max_below}")
        self.max_below = max_below
        self.every_n_steps, self.action = every_n_steps, check_action(action)
        self.components = None if components is None else list(components)
        self.log_prefix = log_prefix
        self.checks: list[tuple[int, str, FloorCheck]] = []
        """Every check made: (step, component, result)."""
        self._last_state = None
        self._checked_any = False

    def _floored(self, pl_module) -> list:
        reward = getattr(pl_module, "reward", None)
        if reward is None or not hasattr(reward, "components"):
            name = type(pl_module).__name__
            raise TypeError(f"RewardFloorCheck reads the module's `reward` components; {name} has none")
        found = [c for c in reward.components if getattr(c, "floor", None) is not None]
        if self.components is not None:
            missing = set(self.components) - {c.name for c in reward.components}
            if missing:
                raise ConfigError(f"RewardFloorCheck components: no reward component named {sorted(missing)}")
            found = [c for c in found if c.name in self.components]
        return found

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        state = getattr(pl_module, "rollout_state", None)
        if state is None or state.rewards is None or state is self._last_state:
            return
        self._last_state = state
        if self._checked_any and state.step % self.every_n_steps != 0:
            return
        self._checked_any = True
        valid = torch.tensor([bool(s.valid) and s.infra_error is None for s in state.samples])
        metrics = {}
        for comp in self._floored(pl_module):
            margin = getattr(comp, "floor_margin", 0.0)
            check = check_floor(state.rewards.components[comp.name], valid, comp.floor, margin, self.max_below)
            self.checks.append((state.step, comp.name, check))
            metrics.update(check.metrics(f"{self.log_prefix}/{comp.name}"))
            act_on_floor(check, f"reward {comp.name!r} at step {state.step}", self.action, trainer)
        if metrics and trainer.logger is not None:
            trainer.logger.log_metrics(metrics, step=trainer.global_step)
