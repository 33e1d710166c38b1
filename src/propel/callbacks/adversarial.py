"""Adversarial probe mining (the PROPEL paper's App. 12): find the probe's false positives with real solver trials.

A false positive is a valid generated task that the probe scores as useful (probability >= ``min_prob``, compared on the
probe's logit whatever the reward's gate: under ``soft_gate`` the reward holds a clipped probability, so the
``ProbeReward``'s ``last_logits``, the logits its gate read, are compared instead) but whose real solve count falls
outside the utility band. During GRPO the policy drifts toward whatever the fixed probe over-rewards; every
``every_n_steps`` steps this callback sends the latest step's top-scored valid tasks to the solver (``n_trials``
attempts each), writes them to a Parquet pool in the labeling schema (plus ``probe_logit`` and ``step``), and logs the
false-positive rate. Tasks the degeneration monitors flag (``propel.callbacks.collapse.monitor_flags``) are mined
first, whatever the probe says of them: the solver's verdict on them is what an auxiliary probe needs.
``adversarial_pool`` (``propel.pools.auxiliary``) then builds an auxiliary probe's training pool (the original
positives; the mined false positives and the collapsed topic's valid tasks as negatives); train it with
the probe stage and pass it as ``ProbeReward(constraint=...)``: the reward on valid tasks becomes
``min(main, auxiliary)``. ``propel.pipeline.coevolution`` runs the whole loop as pipeline stages.
"""

from __future__ import annotations

import hashlib
import math
import warnings
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from lightning.pytorch.callbacks import Callback

from propel.callbacks.collapse import monitor_flags
from propel.domains.trials import SolverSpec, solver_trials
from propel.durable import write_json
from propel.errors import ConfigError
from propel.lit_modules.grpo import GRPOModule
from propel.models.rng import forked_rng
from propel.pools.io import write_part
from propel.pools.rows import pool_row
from propel.pools.schema import MINED_SCHEMA
from propel.rewards.probe_reward import ProbeReward
from propel.rollouts.scorer import GeneratorScorer

__all__ = ["AdversarialProbeMining"]


class AdversarialProbeMining(Callback):
    """Mine probe false positives during GRPO with real solver trials.

    Args:
        output_dir: pool folder for the mined rows (one part file per round; ids ``mined-<step>-<text hash>``, unique
            even when a step without an optimizer update repeats ``global_step``).
        every_n_steps: mine when ``global_step`` crosses a multiple of this (once per crossing: a step that takes
            no optimizer step does not mine again, and ``ppo_epochs > 1`` jumps are not missed).
        component: the reward component holding the probe logit; None uses the module's one ``ProbeReward``.
        min_prob: a valid task whose probe probability is at least this counts as "scored useful".
        max_per_round: at most this many tasks (the highest-scored, distinct texts never mined before) per round.
        solver: the labeling solver and its trial settings (model, n_trials, band, sampling); its model defaults to
            the policy's base model.
        engine: rollout engine kind for the solver (``hf``, ``vllm``, ``vllm_server``); it is built on first use
            and holds its own copy of the solver (use ``vllm_server`` to keep it out of the trainer's memory).
        engine_kwargs: engine arguments.
        dtype: solver weights dtype for the ``hf`` engine.
        seed: solver sampling seed (each round is seeded from it and the step, under a forked CPU and CUDA RNG:
            mining never moves the training RNG streams, so a run with mining trains exactly like one without).
    """

    def __init__(
        self,
        output_dir: str = "runs/mined",
        every_n_steps: int = 10,
        component: str | None = None,
        min_prob: float = 0.5,
        max_per_round: int = 16,
        solver: SolverSpec | None = None,
        engine: str = "hf",
        engine_kwargs: dict[str, Any] | None = None,
        dtype: str = "float32",
        seed: int = 0,
    ) -> None:
        if every_n_steps < 1:
            raise ConfigError(f"AdversarialProbeMining.every_n_steps must be >= 1, got {every_n_steps}")
        if not 0.0 < min_prob < 1.0:
            raise ConfigError(f"AdversarialProbeMining.min_prob must be in (0, 1), got {min_prob}")
        if max_per_round < 1:
            raise ConfigError("AdversarialProbeMining.max_per_round must be >= 1")
        self.output_dir, self.every_n_steps, self.component = Path(output_dir), every_n_steps, component
        self.min_prob, self.max_per_round = min_prob, max_per_round
        self.solver = solver or SolverSpec()
        self.engine_kind, self.engine_kwargs = engine, dict(engine_kwargs or {})
        self.dtype, self.seed = dtype, seed
        self.mined_texts: set[str] = set()
        self.totals = {"rounds": 0, "mined": 0, "false_positives": 0}
        self._last_step = 0
        self._engine = None

    # ----------------------------------------------------------------------------------------------- selection
    def candidates(self, samples: Sequence, scores: torch.Tensor) -> list[tuple[int, float]]:
        """``(index, logit)`` of the valid samples to mine, at most ``max_per_round``, one per distinct task text,
        skipping texts mined in earlier rounds: first those the degeneration monitors flag (``monitor_flags``: a
        copy of the prompt's examples, a degenerate task a lenient domain kept), whatever their logit, then those
        whose probe logit is at least ``logit(min_prob)``; best logit first within each."""
        cut = math.log(self.min_prob / (1.0 - self.min_prob))
        ranked = sorted(
            ((i, float(scores[i])) for i, s in enumerate(samples) if s.valid and s.task is not None),
            key=lambda pair: (not monitor_flags(samples[pair[0]]), -pair[1]),
        )
        ranked = [(i, x) for i, x in ranked if math.isfinite(x)]
        out, seen = [], set()
        for i, logit in ranked:
            text = samples[i].task_text
            flagged = bool(monitor_flags(samples[i]))
            if (logit < cut and not flagged) or text in seen or text in self.mined_texts:
                continue
            seen.add(text)
            out.append((i, logit))
            if len(out) == self.max_per_round:
                break
        return out

    # ----------------------------------------------------------------------------------------------- mining
    def probe_component(self, pl_module: GRPOModule) -> str:
        """The name of the reward component that holds the probe logit."""
        names = [c.name for c in pl_module.reward.components] if pl_module.reward is not None else []
        if self.component is not None:
            if self.component not in names:
                have = ", ".join(names)
                what = f"AdversarialProbeMining.component {self.component!r}"
                raise ConfigError(f"{what} is not a reward component ({have})")
            return self.component
        probes = [c.name for c in pl_module.reward.components if isinstance(c, ProbeReward)]
        if len(probes) != 1:
            raise ConfigError(
                f"AdversarialProbeMining: the module has {len(probes)} ProbeReward components ({', '.join(names)}); "
                "name the one to mine with `component`"
            )
        return probes[0]

    def probe_logits(self, pl_module: GRPOModule, state) -> torch.Tensor:
        """The raw probe logits of the latest step's samples: a ``ProbeReward``'s ``last_logits`` (whatever its
        gate), else the component's values (another component is taken to hold logits)."""
        name = self.probe_component(pl_module)
        component = next(c for c in pl_module.reward.components if c.name == name)
        if isinstance(component, ProbeReward):
            raw = getattr(component, "last_logits", None)
            if raw is not None and raw.numel() == len(state.samples):
                return raw
            if component.mode == "soft_gate":  # its values are clipped probabilities: no logit to compare
                raise RuntimeError(f"AdversarialProbeMining: ProbeReward {name!r} kept no raw logits for this step")
        return state.rewards.components[name]

    def on_train_start(self, trainer, pl_module) -> None:
        self._last_step = max(self._last_step, trainer.global_step)  # a resume continues the interval

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not isinstance(pl_module, GRPOModule):
            raise TypeError(f"AdversarialProbeMining mines GRPOModule rollouts, got {type(pl_module).__name__}")
        step, last = trainer.global_step, self._last_step
        self._last_step = step
        if step // self.every_n_steps <= last // self.every_n_steps:  # no multiple crossed (or no update at all)
            return
        state = pl_module.rollout_state
        if state is None or not state.samples or state.rewards is None:
            return
        samples = state.samples
        picked = self.candidates(samples, self.probe_logits(pl_module, state))
        rows = self.mine(pl_module, samples, picked, step) if picked else []
        if rows and trainer.is_global_zero:
            write_part(self.output_dir, rows, MINED_SCHEMA)
        false_pos = sum(1 for r in rows if r["label"] == 0)
        self.totals["rounds"] += 1
        self.totals["mined"] += len(rows)
        self.totals["false_positives"] += false_pos
        stats = {"mining/candidates": float(len(rows)), "mining/false_positives": float(false_pos)}
        if rows:
            stats["mining/false_positive_rate"] = false_pos / len(rows)
        pl_module.log_dict(stats, on_step=True, on_epoch=False)

    def mine(self, pl_module: GRPOModule, samples: Sequence, picked: list[tuple[int, float]], step: int) -> list[dict]:
        """Run the solver on the picked samples' tasks and return their pool rows."""
        scorer = pl_module.scorer
        if not isinstance(scorer, GeneratorScorer):
            raise TypeError(
                f"AdversarialProbeMining needs a GeneratorScorer (generated tasks), got {type(scorer).__name__}"
            )
        domain = scorer.domain
        tasks = [samples[i].task for i, _ in picked]
        engine = self._solver_engine(pl_module)
        with forked_rng(pl_module.device, zlib.crc32(f"{self.seed}:{step}".encode())):
            trials = solver_trials(domain, engine, tasks, self.solver.sampling(domain.solver_stop), scorer.sandbox)
        rows = []
        for (i, logit), t in zip(picked, trials, strict=True):
            s = samples[i]
            self.mined_texts.add(s.task_text)
            key = hashlib.sha1(s.task_text.encode()).hexdigest()[:12]  # a text is mined once per run: a unique id
            flags = monitor_flags(s)  # the group says what the monitors flagged ("mined:copy")
            group = "mined:" + ",".join(flags) if flags else "mined"
            extra = {"id": f"mined-{step}-{key}", "group": group, "probe_logit": logit, "step": step}
            rows.append(pool_row(s, domain.name, self.solver.n_trials, t, self.solver.band, **extra))
        return rows

    def _solver_engine(self, pl_module):
        if self._engine is None:
            from propel.engines.factory import make_engine

            kwargs = dict(self.engine_kwargs)
            if self.engine_kind == "hf":
                kwargs.update(dtype=self.dtype, device=str(pl_module.device))
            self._engine = make_engine(self.engine_kind, self.solver.model or pl_module.hparams.model, **kwargs)
        return self._engine

    # ----------------------------------------------------------------------------------------------- lifecycle
    def on_fit_end(self, trainer, pl_module) -> None:
        if self._engine is not None:
            self._engine.close()
            self._engine = None
        if not trainer.is_global_zero or not self.totals["rounds"]:
            return
        summary = dict(self.totals)
        summary["false_positive_rate"] = summary["false_positives"] / summary["mined"] if summary["mined"] else None
        write_json(self.output_dir / "summary.json", summary, indent=1)
        if summary["mined"] and not summary["false_positives"]:
            warnings.warn(
                "adversarial mining found no false positives: nothing to train an auxiliary probe on", stacklevel=2
            )

    def state_dict(self) -> dict:
        return {"mined_texts": sorted(self.mined_texts), "totals": dict(self.totals), "last_step": self._last_step}

    def load_state_dict(self, state_dict: dict) -> None:
        self.mined_texts = set(state_dict.get("mined_texts", []))
        self.totals.update(state_dict.get("totals", {}))
        self._last_step = int(state_dict.get("last_step", 0))
