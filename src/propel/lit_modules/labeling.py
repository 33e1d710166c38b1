"""Solver labeling as a Lightning predict job: generate tasks, check validity, run the solver n times, grade.

Each ``predict_step`` takes a batch of generator contexts and returns one row per context (see
``propel.callbacks.pool_writer.SCHEMA``); ``PoolWriter`` writes the rows and ``TaskPoolDataModule`` skips ids already
written, so ``propel predict -c configs/math/label.yaml`` resumes after a kill.
"""

from __future__ import annotations

import json
import time
import zlib
from dataclasses import asdict
from typing import Any

import torch
from lightning.pytorch import LightningModule

from propel.domains.base import Context, Domain, ParseFailure, Task
from propel.domains.trials import in_band, solver_trials
from propel.engines.base import Engine, SamplingSpec
from propel.engines.factory import check_kind, make_engine, make_policy_engine
from propel.errors import ConfigError
from propel.models.policy import load_policy, lora_rank_of
from propel.sandbox.base import Sandbox


class LabelingModule(LightningModule):
    """Generator -> tasks -> validity -> n solver trials -> grades and utility labels.

    Args:
        domain: the task domain (``class_path`` in YAML).
        generator: generator model (bundled alias, folder or hub id).
        solver: solver model; None uses the generator model (one copy in memory).
        oracle: model whose agreeing answers become references (domains with ``set_oracle``); None uses the solver.
        engine: rollout engine: ``hf`` (in-process ``generate``), ``vllm`` (in-process vLLM) or ``vllm_server``.
        engine_kwargs: engine arguments (``dtype``, ``base_url``, ``launch``, ...).
        n_trials: solver attempts per valid task.
        band: inclusive solve-count band that makes a task positive (default 1..3 of 8).
        generator_max_new_tokens: token budget of one generated task.
        generator_temperature: generator sampling temperature (0 = greedy).
        solver_max_new_tokens: token budget of one solver attempt.
        solver_temperature: solver sampling temperature.
        top_p: nucleus sampling for both.
        dtype: model dtype.
        seed: base seed; each batch is seeded from it and its context ids (reruns give the same generations).
        sandbox: verifier sandbox; None makes a ``LocalSandbox`` when the domain needs one.
    """

    def __init__(
        self,
        domain: Domain,
        generator: str = "smollm2-135m-instruct",
        solver: str | None = None,
        oracle: str | None = None,
        engine: str = "hf",
        engine_kwargs: dict[str, Any] | None = None,
        n_trials: int = 8,
        band: tuple[int, int] = (1, 3),
        generator_max_new_tokens: int = 256,
        generator_temperature: float = 1.0,
        solver_max_new_tokens: int = 256,
        solver_temperature: float = 1.0,
        top_p: float = 1.0,
        dtype: str = "float32",
        seed: int = 0,
        sandbox: Sandbox | None = None,
    ):
        super().__init__()
        if n_trials < 1:
            raise ConfigError(f"model.n_trials must be >= 1, got {n_trials}")
        if not 0 <= band[0] <= band[1] <= n_trials:
            raise ConfigError(f"model.band must satisfy 0 <= lo <= hi <= n_trials={n_trials}, got {tuple(band)}")
        check_kind(engine)
        self.save_hyperparameters(ignore=["domain", "sandbox"])
        self.domain, self.sandbox = domain, sandbox
        self.n_trials, self.band = n_trials, (int(band[0]), int(band[1]))
        self.engines: dict[str, Engine] = {}
        self._tasks = self._solver_tokens = 0
        self._seconds = 0.0

    # engines ----------------------------------------------------------------------------------------------------
    def _engine(self, name: str) -> Engine:
        if name not in self.engines:
            self.engines[name] = self._build_engine(name)
        return self.engines[name]

    def _build_engine(self, name: str, adapter: str | None = None) -> Engine:
        """An engine of the configured kind for model ``name`` (plus a LoRA ``adapter``: merged for ``hf``,
        hot-loaded for the vLLM engines)."""
        hp = self.hparams
        kwargs = dict(hp.engine_kwargs or {})
        if adapter is None and hp.engine != "hf":
            return make_engine(hp.engine, name, **kwargs)
        merge = hp.engine == "hf"
        model, tokenizer = load_policy(name, adapter, dtype=hp.dtype, device=str(self.device), merge=merge)
        return make_policy_engine(hp.engine, name, model, tokenizer, lora_rank=lora_rank_of(model), **kwargs)

    def on_predict_start(self) -> None:
        self.generator_engine = self._engine(self.hparams.generator)
        self.solver_engine = self._engine(self.hparams.solver or self.hparams.generator)
        if hasattr(self.domain, "set_oracle"):
            self.domain.set_oracle(self._engine(self.hparams.oracle or self.hparams.solver or self.hparams.generator))
        if self.sandbox is None and self.domain.needs_sandbox:
            from propel.sandbox.local import LocalSandbox

            self.sandbox = LocalSandbox(max_workers=2)

    def on_predict_end(self) -> None:
        for engine in self.engines.values():
            engine.close()

    def throughput(self) -> dict:
        """Tasks/s and solver tokens/s over this run's predict steps."""
        seconds = max(self._seconds, 1e-9)
        return {
            "seconds": self._seconds,
            "tasks_per_s": self._tasks / seconds,
            "solver_tokens": self._solver_tokens,
            "solver_tokens_per_s": self._solver_tokens / seconds,
        }

    # labeling ---------------------------------------------------------------------------------------------------
    def predict_step(self, batch: list[Context], batch_idx: int = 0, dataloader_idx: int = 0) -> list[dict]:
        start = time.perf_counter()
        hp = self.hparams
        torch.manual_seed(zlib.crc32(f"{hp.seed}:{','.join(c.id for c in batch)}".encode()))
        spec = SamplingSpec(
            n=1,
            max_new_tokens=hp.generator_max_new_tokens,
            temperature=hp.generator_temperature,
            top_p=hp.top_p,
            stop=list(self.domain.generator_stop),
        )
        completions = [c[0].text for c in self.generator_engine.generate([c.prompt for c in batch], spec)]
        parsed = [self.domain.parse(text) for text in completions]
        rows = [self._row(ctx, text, p) for ctx, text, p in zip(batch, completions, parsed, strict=True)]
        tasks = {i: p for i, p in enumerate(parsed) if isinstance(p, Task)}
        verdicts = self.domain.validity(list(tasks.values()), self.sandbox) if tasks else []
        valid = {}
        for (i, task), verdict in zip(tasks.items(), verdicts, strict=True):
            rows[i].update(valid=verdict.ok, reason=verdict.reason, task=task.to_json())
            if verdict.ok:
                valid[i] = task
        self._label(valid, rows)
        self._tasks += len(batch)
        self._seconds += time.perf_counter() - start
        return rows

    def _label(self, valid: dict[int, Task], rows: list[dict]) -> None:
        if not valid:
            return
        hp = self.hparams
        spec = SamplingSpec(
            n=self.n_trials,
            max_new_tokens=hp.solver_max_new_tokens,
            temperature=hp.solver_temperature,
            top_p=hp.top_p,
            stop=list(self.domain.solver_stop),
        )
        trials = solver_trials(self.domain, self.solver_engine, list(valid.values()), spec, self.sandbox)
        for i, t in zip(valid, trials, strict=True):
            self._solver_tokens += t.tokens
            rows[i].update(
                grades=t.grades,
                solve_count=t.solve_count,
                label=int(in_band(t.solve_count, self.band)),
                topic=self.domain.topic(valid[i]),
                solver_tokens=t.tokens,
            )

    def _row(self, ctx: Context, completion: str, parsed: Task | ParseFailure) -> dict:
        return {
            "id": ctx.id,
            "group": ctx.group,
            "domain": self.domain.name,
            "context": json.dumps(asdict(ctx.prompt), sort_keys=True),
            "completion": completion,
            "task": None,
            "valid": False,
            "reason": parsed.reason if isinstance(parsed, ParseFailure) else "unchecked",
            "grades": None,
            "solve_count": None,
            "label": None,
            "topic": None,
            "n_trials": self.n_trials,
            "solver_tokens": 0,
        }
