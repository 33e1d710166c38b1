"""Adversarial probe mining (seed 004, App. 12): find the probe's false positives with real solver trials.

A false positive is a valid generated task that the probe scores as useful (probability >= ``min_prob``) but whose
real solve count falls outside the utility band. During GRPO the policy drifts toward whatever the fixed probe
over-rewards; every ``every_n_steps`` steps this callback sends the latest step's top-scored valid tasks to the solver
(``n_trials`` attempts each), writes them to a Parquet pool in the labeling schema (plus ``probe_logit`` and
``step``), and logs the false-positive rate. ``adversarial_pool`` then builds an auxiliary probe's training pool
(the original positives + the mined false positives as negatives); train it with the probe stage and pass it as
``ProbeReward(constraint=...)``: the reward on valid tasks becomes ``min(main, auxiliary)``.
"""

from __future__ import annotations

import json
import math
import warnings
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import torch
from lightning.pytorch.callbacks import Callback

from propel.callbacks.pool_writer import SCHEMA, write_part
from propel.datamodules.task_pool import read_pool
from propel.domains.trials import in_band, solver_trials
from propel.engines.base import SamplingSpec
from propel.errors import ConfigError

MINED_SCHEMA = SCHEMA.append(pa.field("probe_logit", pa.float32())).append(pa.field("step", pa.int64()))


class AdversarialProbeMining(Callback):
    """Mine probe false positives during GRPO with real solver trials.

    Args:
        output_dir: pool folder for the mined rows (one part file per round; ids ``mined-<step>-<k>``).
        every_n_steps: mine after every this many optimizer steps.
        component: the reward component holding the probe logit (``ProbeReward``'s ``name``).
        min_prob: a valid task whose probe probability is at least this counts as "scored useful".
        max_per_round: at most this many tasks (the highest-scored, distinct texts never mined before) per round.
        solver: model the solver trials run on (bundled alias, folder or hub id): the labeling solver.
        engine: rollout engine kind for the solver (``hf``, ``vllm``, ``vllm_server``); it is built on first use
            and holds its own copy of the solver (use ``vllm_server`` to keep it out of the trainer's memory).
        engine_kwargs: engine arguments.
        n_trials, band: solver attempts per task and the inclusive utility band, as in labeling.
        solver_max_new_tokens, solver_temperature, top_p: solver sampling, as in labeling.
        dtype: solver weights dtype for the ``hf`` engine.
        seed: solver sampling seed (each round is seeded from it and the step, under a forked RNG: mining never
            moves the training RNG stream, so a run with mining trains exactly like one without).
    """

    def __init__(
        self,
        output_dir: str = "runs/mined",
        every_n_steps: int = 10,
        component: str = "probe",
        min_prob: float = 0.5,
        max_per_round: int = 16,
        solver: str = "smollm2-135m-instruct",
        engine: str = "hf",
        engine_kwargs: dict[str, Any] | None = None,
        n_trials: int = 8,
        band: tuple[int, int] = (1, 3),
        solver_max_new_tokens: int = 256,
        solver_temperature: float = 1.0,
        top_p: float = 1.0,
        dtype: str = "float32",
        seed: int = 0,
    ) -> None:
        if every_n_steps < 1:
            raise ConfigError(f"AdversarialProbeMining.every_n_steps must be >= 1, got {every_n_steps}")
        if not 0.0 < min_prob < 1.0:
            raise ConfigError(f"AdversarialProbeMining.min_prob must be in (0, 1), got {min_prob}")
        if max_per_round < 1 or n_trials < 1:
            raise ConfigError("AdversarialProbeMining.max_per_round and n_trials must be >= 1")
        if not 0 <= band[0] <= band[1] <= n_trials:
            raise ConfigError(f"AdversarialProbeMining.band must satisfy 0 <= lo <= hi <= {n_trials}, got {band}")
        self.output_dir, self.every_n_steps, self.component = Path(output_dir), every_n_steps, component
        self.min_prob, self.max_per_round = min_prob, max_per_round
        self.solver, self.engine_kind, self.engine_kwargs = solver, engine, dict(engine_kwargs or {})
        self.n_trials, self.band = n_trials, (int(band[0]), int(band[1]))
        self.spec = dict(max_new_tokens=solver_max_new_tokens, temperature=solver_temperature, top_p=top_p)
        self.dtype, self.seed = dtype, seed
        self.mined_texts: set[str] = set()
        self.totals = {"rounds": 0, "mined": 0, "false_positives": 0}
        self._engine = None

    # ----------------------------------------------------------------------------------------------- selection
    def candidates(self, samples: Sequence, scores: torch.Tensor) -> list[tuple[int, float]]:
        """``(index, logit)`` of the valid samples scored at least ``min_prob``, best first, one per distinct task
        text, skipping texts mined in earlier rounds, at most ``max_per_round``."""
        cut = math.log(self.min_prob / (1.0 - self.min_prob))
        ranked = sorted(
            ((i, float(scores[i])) for i, s in enumerate(samples) if s.valid and s.task is not None),
            key=lambda pair: -pair[1],
        )
        out, seen = [], set()
        for i, logit in ranked:
            text = samples[i].task_text
            if logit < cut or text in seen or text in self.mined_texts:
                continue
            seen.add(text)
            out.append((i, logit))
            if len(out) == self.max_per_round:
                break
        return out

    # ----------------------------------------------------------------------------------------------- mining
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == 0 or step % self.every_n_steps:
            return
        samples, breakdown = getattr(pl_module, "latest_samples", None), getattr(pl_module, "latest_rewards", None)
        if not samples or breakdown is None:
            return
        if self.component not in breakdown.components:
            have = ", ".join(breakdown.components)
            raise ConfigError(f"AdversarialProbeMining.component {self.component!r} is not a reward component ({have})")
        picked = self.candidates(samples, breakdown.components[self.component])
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

    def mine(self, pl_module, samples: Sequence, picked: list[tuple[int, float]], step: int) -> list[dict]:
        """Run the solver on the picked samples' tasks and return their pool rows."""
        domain = pl_module.domain
        spec = SamplingSpec(n=self.n_trials, stop=list(domain.solver_stop), **self.spec)
        tasks = [samples[i].task for i, _ in picked]
        engine = self._solver_engine(pl_module)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(zlib.crc32(f"{self.seed}:{step}".encode()))
            trials = solver_trials(domain, engine, tasks, spec, getattr(pl_module, "sandbox", None))
        rows = []
        for k, ((i, logit), t) in enumerate(zip(picked, trials, strict=True)):
            s = samples[i]
            self.mined_texts.add(s.task_text)
            rows.append(
                {
                    "id": f"mined-{step}-{k}",
                    "group": "mined",
                    "domain": domain.name,
                    "context": json.dumps({"prompt": s.prompt}),
                    "completion": s.completion,
                    "task": s.task.to_json(),
                    "valid": True,
                    "reason": "ok",
                    "grades": t.grades,
                    "solve_count": t.solve_count,
                    "label": int(in_band(t.solve_count, self.band)),
                    "topic": s.topic,
                    "n_trials": self.n_trials,
                    "solver_tokens": t.tokens,
                    "probe_logit": logit,
                    "step": step,
                }
            )
        return rows

    def _solver_engine(self, pl_module):
        if self._engine is None:
            from propel.engines.factory import make_engine

            kwargs = dict(self.engine_kwargs)
            if self.engine_kind == "hf":
                kwargs.update(dtype=self.dtype, device=str(pl_module.device))
            self._engine = make_engine(self.engine_kind, self.solver, **kwargs)
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
        self.output_dir.mkdir(parents=True, exist_ok=True)
        (self.output_dir / "summary.json").write_text(json.dumps(summary, indent=1))
        if summary["mined"] and not summary["false_positives"]:
            warnings.warn(
                "adversarial mining found no false positives: nothing to train an auxiliary probe on", stacklevel=2
            )

    def state_dict(self) -> dict:
        return {"mined_texts": sorted(self.mined_texts), "totals": dict(self.totals)}

    def load_state_dict(self, state_dict: dict) -> None:
        self.mined_texts = set(state_dict.get("mined_texts", []))
        self.totals.update(state_dict.get("totals", {}))


def _pool_row(record: dict) -> dict:
    """A pandas record back in the pool schema's Python types (labels and counts as ints, grades as bools)."""
    row = {f.name: record.get(f.name) for f in SCHEMA}
    for key in ("solve_count", "label", "n_trials", "solver_tokens"):
        row[key] = None if row[key] is None or row[key] != row[key] else int(row[key])
    row["grades"] = None if row["grades"] is None else [bool(g) for g in row["grades"]]
    row["valid"] = bool(row["valid"])
    return row


def adversarial_pool(
    original: str | Path, mined: str | Path, output_dir: str | Path, keep_negatives: bool = False
) -> dict[str, int]:
    """Write the auxiliary probe's training pool: the original pool's valid positives (label 1) and the mined false
    positives (label 0), plus the original valid negatives with ``keep_negatives``. Returns the class counts."""
    orig, found = read_pool(original), read_pool(mined)
    valid = orig[orig["valid"].astype(bool) & orig["label"].notna()]
    positives = valid[valid["label"] == 1]
    false_pos = found[found["label"] == 0] if len(found) else found
    if not len(positives):
        raise ValueError(f"{original}: no valid positive rows; the auxiliary probe needs the original positives")
    if not len(false_pos):
        raise ValueError(f"{mined}: no mined false positives; nothing for the auxiliary probe to learn")
    parts = [positives, false_pos] + ([valid[valid["label"] == 0]] if keep_negatives else [])
    rows = [_pool_row(r) for part in parts for r in part.to_dict("records")]
    out = Path(output_dir)
    if any(out.glob("part-*.parquet")):
        raise FileExistsError(f"{out} already holds a pool; pick an empty folder")
    write_part(out, rows)
    return {"positives": len(positives), "false_positives": len(false_pos), "rows": len(rows)}
