"""Solver labeling as a Lightning predict job: generate tasks, check validity, run the solver n times, grade.

Each ``predict_step`` takes a batch of generator contexts and returns one pool row per context
(``propel.pools.SCHEMA``); ``PoolWriter`` writes the rows and ``TaskPoolDataModule`` skips ids already written, so
``propel predict -c configs/math/label.yaml`` resumes after a kill.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import replace
from typing import Any

import torch
from lightning.pytorch import LightningModule

from propel.domains.agents import writes_in_episodes
from propel.domains.exact_trials import solve_probabilities
from propel.domains.interface import Domain, lenient_valid
from propel.domains.trials import SolverSpec, Trials, solver_trials
from propel.engines.engine import Engine, SamplingSpec
from propel.engines.factory import check_kind, make_adapter_engine, make_engine
from propel.errors import ConfigError
from propel.host_memory import release_freed_memory
from propel.lit_modules.phases import Phases
from propel.pools.rows import pool_row
from propel.records import Context, Sample
from propel.rollouts.agent_trials import AgentEpisodes, AgentSolver
from propel.rollouts.scorer import GeneratorScorer
from propel.rollouts.single_turn import sample_single_turn
from propel.sandbox.sandbox import Sandbox


class LabelingModule(LightningModule):
    """Generator -> tasks -> validity -> n solver trials -> grades and utility labels.

    Args:
        domain: the task domain (``class_path`` in YAML).
        generator: generator model (bundled alias, folder or hub id).
        adapter: LoRA adapter on the generator (a peft folder or a GRPO ``.ckpt``): label a trained policy's tasks
            (the pipeline labels a warm start's, the probe then learns the tasks GRPO will sample); None labels the
            base generator's. The solver and oracle stay the untrained model.
        solver: who solves the valid tasks and how often (model, n_trials, band, sampling); the default solver is
            the generator's model (one copy in memory), 8 trials, band 1..3.
        oracle: model whose agreeing answers become references (domains with ``needs_oracle``); None leaves it to the
            domain (``OracleMathDomain(oracle_model=...)``). Never the solver by default: a solver that is its own
            oracle keeps only the tasks it agrees with itself on.
        engine: rollout engine: ``hf`` (in-process ``generate``), ``vllm`` (in-process vLLM) or ``vllm_server``.
        engine_kwargs: engine arguments (``dtype``, ``base_url``, ``launch``, ...).
        max_new_tokens: token budget of one generated task.
        temperature: generator sampling temperature (0 = greedy).
        top_p: generator nucleus sampling.
        dtype: model dtype.
        seed: base seed; each batch is seeded from it and its context ids (reruns give the same generations).
        sandbox: verifier sandbox; None makes a ``LocalSandbox`` when the domain needs one (stopped at the end).
        solver_agent: run each solver trial as a multi-turn agent episode (``propel.rollouts.AgentSolver``: an
            environment such as ``ToolEnv``, concurrency, schedule); solved = the domain's ``agent_grade`` of what the
            episode left. None: one completion per trial, graded by ``domain.grade``.
        generator_agent: write each task in an agent episode (``propel.rollouts.AgentEpisodes``; SWE: inject a bug
            in a clean checkout, ``SweDomain(generate=true)``); the task is what the episode left
            (``domain.episode_completion``), checked like a generated one. None: one completion per task.
        exact_p: also record each valid task's exact solve probability (``exact_p``: one teacher-forced solver pass,
            ``propel.domains.exact_trials``) where the domain gives an answer text (``Domain.answer_text``) and the
            solver is a local HF model answering in one completion: a label without the trials' sampling noise.
    """

    def __init__(
        self,
        domain: Domain,
        generator: str = "smollm2-135m-instruct",
        adapter: str | None = None,
        solver: SolverSpec | None = None,
        oracle: str | None = None,
        engine: str = "hf",
        engine_kwargs: dict[str, Any] | None = None,
        max_new_tokens: int = 256,
        temperature: float = 1.0,
        top_p: float = 1.0,
        dtype: str = "float32",
        seed: int = 0,
        sandbox: Sandbox | None = None,
        solver_agent: AgentSolver | None = None,
        generator_agent: AgentEpisodes | None = None,
        exact_p: bool = True,
    ):
        super().__init__()
        check_kind(engine)
        if domain.needs_oracle and oracle is None and getattr(domain, "oracle_model", None) is None:
            raise ConfigError(
                f"domain {domain.name!r} takes reference answers from an oracle: set `oracle` (a model, ideally not "
                "the solver) or the domain's oracle_model"
            )
        if generator_agent is not None and not writes_in_episodes(domain):
            raise ConfigError(f"generator_agent: {type(domain).__name__}'s tasks are not written by agent episodes")
        self.save_hyperparameters(ignore=["domain", "sandbox", "solver", "solver_agent", "generator_agent"])
        self.domain = domain
        self.scorer = GeneratorScorer(domain, sandbox)
        self.solver = solver or SolverSpec()
        self.solver_agent, self.generator_agent = solver_agent, generator_agent
        if solver_agent is not None or generator_agent is not None:
            # agent episodes run in sandbox sessions whatever the domain's validity needs
            self.scorer.needs_sandbox = True
        self.engines: dict[str, Engine] = {}
        self._tasks = self._solver_tokens = 0
        self._seconds = 0.0
        self.phases = Phases()
        """Where the running batch is (generating, checking, solving) and the tasks done: the progress display's."""

    @property
    def n_trials(self) -> int:
        return self.solver.n_trials

    @property
    def band(self) -> tuple[int, int]:
        return self.solver.band

    @property
    def sandbox(self) -> Sandbox | None:
        return self.scorer.sandbox

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
        return make_adapter_engine(hp.engine, name, adapter, dtype=hp.dtype, device=str(self.device), **kwargs)

    def start(self, generator_engine: Engine | None = None) -> None:
        """Build the engines (the generator's may be given; else the generator, with ``adapter`` merged when set) and
        open the sandbox."""
        hp = self.hparams
        self.phases.start("loading models")
        solver_model = self.solver.model or hp.generator
        if generator_engine is None and hp.adapter is not None:
            # base + adapter under its own key: the solver and oracle keep the untrained model's engine
            key = f"{hp.generator}+{hp.adapter}"
            generator_engine = self.engines[key] = self._build_engine(hp.generator, hp.adapter)
        self.generator_engine = generator_engine or self._engine(hp.generator)
        self.solver_engine = self._engine(solver_model)
        if self.domain.needs_oracle and hp.oracle is not None:
            self.domain.set_oracle(self._engine(hp.oracle))
        self.scorer.open()
        self.phases.stop()
        ahead = self._tasks_ahead()
        if ahead is not None:
            self.phases.totals["tasks"] = ahead

    def _tasks_ahead(self) -> int | None:
        """The contexts this run's predict or test loaders hold (ready-made batches), for the progress display."""
        trainer = self._trainer
        if trainer is None or not (trainer.predicting or trainer.testing):
            return None
        loaders = trainer.predict_dataloaders if trainer.predicting else trainer.test_dataloaders
        loaders = loaders if isinstance(loaders, list | tuple) else [loaders]
        batches = [getattr(getattr(loader, "dataset", None), "batches", None) for loader in loaders]
        return None if None in batches else sum(len(batch) for every in batches for batch in every)

    def stop(self) -> None:
        """Release the engines and the sandbox this module started."""
        for engine in self.engines.values():
            engine.close()
        self.scorer.close()

    def on_predict_start(self) -> None:
        self.start()

    def on_predict_end(self) -> None:
        self.stop()

    def throughput(self) -> dict:
        """Tasks/s and solver tokens/s over this run's steps, of all ranks together (counts summed, seconds of the
        slowest rank: they run side by side); every rank must call it."""
        counts = torch.tensor([float(self._tasks), float(self._solver_tokens), self._seconds], dtype=torch.float64)
        if self._trainer is not None and self.trainer.world_size > 1:
            every = self.trainer.strategy.all_gather(counts).reshape(-1, 3)
            counts = torch.cat([every[:, :2].sum(0), every[:, 2].max().reshape(1)])
        tasks, tokens, seconds = int(counts[0]), int(counts[1]), float(counts[2])
        return {
            "seconds": seconds,
            "tasks_per_s": tasks / max(seconds, 1e-9),
            "solver_tokens": tokens,
            "solver_tokens_per_s": tokens / max(seconds, 1e-9),
        }

    # labeling ---------------------------------------------------------------------------------------------------
    def predict_step(self, batch: list[Context], batch_idx: int = 0, dataloader_idx: int = 0) -> list[dict]:
        start = time.perf_counter()
        hp = self.hparams
        self.phases.reset()
        torch.manual_seed(zlib.crc32(f"{hp.seed}:{','.join(c.id for c in batch)}".encode()))
        spec = SamplingSpec(
            n=1,
            max_new_tokens=hp.max_new_tokens,
            temperature=hp.temperature,
            top_p=hp.top_p,
            stop=list(self.scorer.stop),
        )
        # contexts that carry their task's text (``data["completion"]``: SWE's procedural bugs and recorded generator
        # episodes) skip the generator engine; the rest are sampled; all are scored together
        sampled = [c for c in batch if _given(c) is None]
        self.phases.start("generating", total=len(sampled), unit="tasks")
        fresh = iter(g[0] for g in self._generate(sampled, spec)) if sampled else iter(())
        samples = [next(fresh) if _given(c) is None else Sample("", _given(c), context=c) for c in batch]
        self.phases.start("checking", total=len(samples), unit="tasks")
        self.scorer.score(samples)
        valid = [s for s in samples if s.valid]
        # degenerate tasks have ground truth too: solved like valid ones, so evaluation can show the lenient yield
        # beside the strict one (their rows stay invalid: probes never train on them, the reward floors them)
        tried = [s for s in samples if lenient_valid(s.valid, s.info.get("reason"))]
        self.phases.start("solving", total=len(tried), unit=f"tasks x {self.n_trials} trials")
        trials = dict(zip(map(id, tried), self.run_trials(tried), strict=True))
        self._exact_p(tried)
        rows = []
        for s in samples:
            t = trials.get(id(s))
            self._solver_tokens += t.tokens if t is not None else 0
            rows.append(pool_row(s, self.domain.name, self.n_trials, t, self.band))
        self._tasks += len(batch)
        self._seconds += time.perf_counter() - start
        self.phases.count(tasks=len(batch), valid=len(valid))
        self.phases.stop()
        release_freed_memory()  # the batch's generations and trials leave the resident set (propel.host_memory)
        return rows

    def _generate(self, contexts: list[Context], spec: SamplingSpec) -> list[list[Sample]]:
        """One task per context: a completion, or an agent episode (whose stop strings are its environment's)."""
        if self.generator_agent is None:
            return sample_single_turn(self.generator_engine, contexts, spec)
        return self.generator_agent.run(self.generator_engine, contexts, replace(spec, stop=[]), self.sandbox)

    def _exact_p(self, samples: list[Sample]) -> None:
        """``info["exact_p"]`` of each tried task whose domain gives an answer text (see ``exact_p``)."""
        local = getattr(self.solver_engine, "model", None) is not None and self.solver_agent is None
        if not (self.hparams.get("exact_p", True) and local and samples):
            return
        ps = solve_probabilities(
            self.domain,
            [s.task for s in samples],
            self.solver_engine,
            temperature=self.solver.temperature,
            top_p=self.solver.top_p,
        )
        for s, p in zip(samples, ps, strict=True):
            if p is not None:
                s.info["exact_p"] = p

    def run_trials(self, samples: list[Sample]) -> list[Trials]:
        """The solver's graded trials of each sample's (valid) task: completions, or agent episodes."""
        tasks = [s.task for s in samples]
        if self.solver_agent is None:
            sampling = self.solver.sampling(self.domain.solver_stop)
            return solver_trials(self.domain, self.solver_engine, tasks, sampling, self.sandbox)
        ids = [f"{s.context.id}-solver" for s in samples]
        trials, _ = self.solver_agent.trials(self.domain, self.solver_engine, tasks, self.solver, self.sandbox, ids)
        return trials


def _given(context: Context) -> str | None:
    """The task text a context brings along (written before the run), or None when the generator must sample it."""
    return context.data.get("completion")
