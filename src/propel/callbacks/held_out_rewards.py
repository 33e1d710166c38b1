"""Every reward component measured on a fixed held-out task set at checkpoints, not on the training windows.

A training window's mean mixes what the policy learned with which tasks that step drew; a fixed held-out set (tasks
never trained on, the same contexts at every checkpoint) measures the policy alone. ``HeldOutRewards`` samples the
held-out contexts with the training sampling at step 0 and every ``every_n_steps`` optimizer steps, scores them with
the module's own reward (every component, and the values logged beside them), logs ``held_out/reward/<name>`` and
writes ``held_out_curves.json``. Its sampling runs in a forked random state with its own seed, so a run measured this
way trains exactly as it would without the measurement.
"""

from __future__ import annotations

import copy
import os

import lightning.pytorch as pl
import torch

from propel.durable import write_json
from propel.errors import ConfigError
from propel.models.rng import forked_rng
from propel.records import TaskSource
from propel.rollouts.steps import ContextBatch

CURVES = "held_out_curves.json"


class HeldOutRewards(pl.Callback):
    """Reward components on a fixed held-out task set at step 0 and every ``every_n_steps`` steps.

    Args:
        tasks: where the held-out contexts come from (e.g. ``TriageTickets(split: eval)``: tickets the training
            split never draws).
        dirpath: the run folder ``held_out_curves.json`` goes to (``{name: [[step, mean], ...]}``).
        contexts: held-out contexts (drawn once, with ``seed``: the same ones at every checkpoint).
        samples: answers sampled per context at each checkpoint.
        every_n_steps: optimizer steps between checkpoints (and one at the end of training).
        seed: the contexts' draw and the sampling's seed (the checkpoint at step k samples with ``seed + k``).
    """

    def __init__(
        self,
        tasks: TaskSource,
        dirpath: str,
        contexts: int = 16,
        samples: int = 4,
        every_n_steps: int = 20,
        seed: int = 12345,
    ) -> None:
        if contexts < 1 or samples < 1 or every_n_steps < 1:
            raise ConfigError(
                f"HeldOutRewards needs contexts, samples and every_n_steps >= 1, got {contexts}, {samples}, "
                f"{every_n_steps}"
            )
        self.tasks, self.dirpath, self.n_contexts, self.samples = tasks, dirpath, contexts, samples
        self.every_n_steps, self.seed = every_n_steps, seed
        self.curves: dict[str, list[tuple[int, float]]] = {}

    def setup(self, trainer, pl_module, stage: str) -> None:
        for needed in ("sampling", "engine", "reward", "rollout_source", "eval_mode", "sync_engine"):
            if not hasattr(pl_module, needed):
                name = type(pl_module).__name__
                raise TypeError(f"HeldOutRewards samples and scores with a GRPO-style module; {name} has no `{needed}`")
        if getattr(pl_module.hparams, "async_rollouts", False):
            raise ConfigError("HeldOutRewards samples with the module's engine, which async_rollouts' worker holds")

    def measured_steps(self) -> list[int]:
        return [step for step, _ in self.curves.get("total", [])]

    def on_train_start(self, trainer, pl_module) -> None:
        if trainer.global_step == 0 and 0 not in self.measured_steps():  # a resumed run measured its start already
            self.measure(trainer, pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step % self.every_n_steps == 0 and step not in self.measured_steps():
            self.measure(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        if trainer.global_step not in self.measured_steps():
            self.measure(trainer, pl_module)

    def measure(self, trainer, pl_module) -> dict[str, float]:
        """Sample and score the held-out contexts now; record and log each component's mean."""
        step, rank, size = trainer.global_step, trainer.global_rank, trainer.world_size
        contexts = self.tasks.contexts(self.n_contexts, seed=self.seed)[rank::size]
        sampling = copy.deepcopy(pl_module.sampling)
        sampling.n = self.samples
        # Seeded by the step, so a resumed run samples each checkpoint as an unbroken one does; forked, so the
        # training run's random streams are left as they were.
        with forked_rng(pl_module.device, self.seed + step):
            pl_module.sync_engine()
            with pl_module.eval_mode():
                rollout = pl_module.rollout_source.rollout(pl_module.engine, ContextBatch(-1, contexts), sampling)
                breakdown = pl_module.reward(rollout.samples)
        ok = torch.tensor([s.infra_error is None for s in rollout.samples])
        means = {}
        for name, values in {"total": breakdown.total, **breakdown.components, **breakdown.logged}.items():
            kept = values.float()[ok & torch.isfinite(values.float())]  # what the reward judged (NaN: it did not)
            total = float(trainer.strategy.reduce(kept.sum().to(pl_module.device), reduce_op="sum"))
            count = torch.tensor(float(len(kept)), device=pl_module.device)
            count = float(trainer.strategy.reduce(count, reduce_op="sum"))
            means[name] = total / count if count else float("nan")
        for name, value in means.items():
            self.curves.setdefault(name, []).append((step, value))
        if trainer.is_global_zero:  # straight to the loggers: Lightning refuses `log` in on_train_start and _end
            for logger in trainer.loggers:
                logger.log_metrics({f"held_out/reward/{k}": v for k, v in means.items()}, step=step)
            write_json(os.path.join(self.dirpath, CURVES), self.curves, indent=1)  # a crash never leaves half a file
        return means

    def state_dict(self) -> dict:
        """The checkpoints measured so far (a resumed run keeps its step 0)."""
        return {"curves": {k: [list(p) for p in v] for k, v in self.curves.items()}}

    def load_state_dict(self, state_dict: dict) -> None:
        self.curves = {k: [(int(s), float(v)) for s, v in p] for k, p in state_dict.get("curves", {}).items()}
