"""Evaluation as ``propel test``: fresh tasks from a policy, n real solver trials each, utility and diversity.

``EvaluationModule`` is the labeling job (``LabelingModule``: generate, validity, n solver trials, grade) with the
generator optionally carrying a LoRA adapter (a peft folder or a GRPO checkpoint); ``TaskPoolDataModule`` feeds it
fresh contexts (a seed apart from labeling's, ``pool_dir`` = ``output_dir``). Labeled rows go to Parquet parts in
``output_dir`` as they are made (a rerun skips contexts already there, and refuses a folder whose
``settings.json`` records another adapter, solver, domain or seed), then a ``summary.json``
(``propel.pools.evaluation_summary``: every metric with its confidence interval) and ``scores.json`` (the
per-generation Self-BLEU scores a base-vs-trained comparison bootstraps, ``propel.pipeline.compare``).
"""

from __future__ import annotations

from pathlib import Path

from propel.domains.interface import Domain, lenient_valid
from propel.durable import write_json
from propel.errors import ConfigError
from propel.lit_modules.labeling import LabelingModule
from propel.pools.io import read_pool, write_part
from propel.pools.manifest import check_manifest, run_settings
from propel.pools.summary import diversity_scores, evaluation_summary, exact_utility_values, print_summary_table
from propel.records import Context, Task

SUMMARY = "summary.json"
SCORES = "scores.json"


class EvaluationModule(LabelingModule):
    """``propel test``: label fresh tasks from a (possibly LoRA-adapted) generator and summarize them.

    Args:
        domain: the task domain.
        adapter: LoRA adapter of the trained policy (peft folder or GRPO ``.ckpt``); None evaluates the base.
        output_dir: where labeled rows (``part-*.parquet``) and ``summary.json`` go; a rerun resumes.
        confidence: level of every interval in the summary.
        n_resamples: bootstrap resamples of the Self-BLEU intervals (seeded with ``seed``).
        **kwargs: as ``LabelingModule`` (generator, solver, engine, sampling, sandbox, ...).
    """

    def __init__(
        self,
        domain: Domain,
        adapter: str | None = None,
        output_dir: str = "runs/eval/policy",
        confidence: float = 0.95,
        n_resamples: int = 2000,
        **kwargs,
    ):
        super().__init__(domain, adapter=adapter, **kwargs)
        if not 0 < confidence < 1:
            raise ConfigError(f"confidence must be in (0, 1), got {confidence}")
        if n_resamples < 1:
            raise ConfigError(f"n_resamples must be >= 1, got {n_resamples}")
        self.output_dir = Path(output_dir)
        self.summary: dict = {}

    def setup(self, stage: str) -> None:
        """Check (or write) ``output_dir``'s settings manifest before anything is generated (the datamodule checks
        its ``pool_dir`` the same way; they are normally one folder)."""
        datamodule = getattr(self.trainer, "datamodule", None) if self._trainer is not None else None
        check_manifest(self.output_dir, run_settings(self, getattr(datamodule, "seed", None)), "output_dir")

    def on_test_start(self) -> None:
        self.start()  # the generator with ``adapter`` merged when set; the solver and oracle stay the base

    def test_step(self, batch: list[Context], batch_idx: int = 0) -> None:
        rows = self.predict_step(batch, batch_idx)
        if rows:  # every rank writes its own parts (rank in the name)
            write_part(self.output_dir, rows, rank=self.trainer.global_rank)

    def on_test_end(self) -> None:
        """Every rank's rows are written; rank 0 summarizes them, writes the summary and scores, logs them."""
        self.stop()
        self.trainer.strategy.barrier("EvaluationModule.on_test_end")  # every rank's parts are written before the read
        self._write_summary()

    def teardown(self, stage: str) -> None:
        """A rerun of a run that wrote its last rows but was stopped before its summary has no batch left, so
        Lightning skips the test loop and ``on_test_end``: summarize the rows on disk here, or it could never finish.
        Only when the datamodule found every context in the folder (never after a failed run)."""
        super().teardown(stage)
        datamodule = getattr(self._trainer, "datamodule", None) if self._trainer is not None else None
        if stage == "test" and not self.summary and getattr(datamodule, "complete", False):
            self._write_summary()

    def _write_summary(self) -> None:
        throughput = self.throughput()  # all ranks' counts: every rank takes part
        if self.trainer.global_rank != 0:
            return
        self.summary, scores = self.summarize(read_pool(self.output_dir))
        self.summary.update({"generator": self.hparams.generator, "adapter": self.hparams.adapter, **throughput})
        write_json(self.output_dir / SUMMARY, self.summary, indent=1)
        write_json(self.output_dir / SCORES, scores, indent=None)
        print_summary_table(dict(self.summary), f"evaluation ({self.output_dir})")
        self.log_summary()

    def summarize(self, frame) -> tuple[dict, dict]:
        """``(summary, scores)`` of the evaluation pool: validity, utility, diversity and the domain's per-task
        numbers, with intervals; ``scores`` holds the per-sample values ``compare`` resamples."""
        valid = [bool(v) for v in frame["valid"]]
        # the paper's diversity is over all generations: the rendered task when it parsed, else the raw completion
        texts = [
            self.domain.render(Task.from_json(t)) if isinstance(t, str) else c
            for t, c in zip(frame["task"], frame["completion"], strict=True)
        ]
        counts = [None if c is None or c != c else int(c) for c in frame["solve_count"]]
        topics = [t if isinstance(t, str) else None for t in frame["topic"]]
        hp = self.hparams
        scores = diversity_scores(valid, texts)
        per_task: dict[str, list[float]] = {}  # the domain's per-task numbers over valid tasks (SWE: diff size)
        for task, ok in zip(frame["task"], valid, strict=True):
            for name, value in (self.domain.task_metrics(Task.from_json(task)) if ok else {}).items():
                per_task.setdefault(name, []).append(float(value))
        exact_p = list(frame["exact_p"]) if "exact_p" in frame else [None] * len(valid)
        exact = exact_utility_values(valid, exact_p, self.n_trials, self.band)
        reasons = [r if isinstance(r, str) else None for r in frame["reason"]]
        lenient = [lenient_valid(v, r) for v, r in zip(valid, reasons, strict=True)]
        exact_lenient = exact_utility_values(lenient, exact_p, self.n_trials, self.band)
        summary = evaluation_summary(
            valid, counts, texts, topics, self.n_trials, self.band, hp.confidence, hp.n_resamples, hp.seed, scores,
            task_metrics=per_task, exact_utility=exact, reasons=reasons, exact_utility_lenient=exact_lenient,
        )  # fmt: skip
        scores.update({f"{name}_mean": values for name, values in per_task.items()})  # keys as the summary's means
        if exact is not None:
            scores["exact_utility"] = exact
        if exact_lenient is not None:
            scores["exact_utility_lenient"] = exact_lenient
        return summary, scores

    def log_summary(self) -> None:
        """The summary's numbers and intervals as ``eval/*`` metrics of the run's logger."""
        if self.trainer.logger is None:
            return
        metrics = {f"eval/{k}": float(v) for k, v in self.summary.items() if isinstance(v, (int, float))}
        metrics.update({f"eval/solve_count_{k}": float(c) for k, c in enumerate(self.summary["solve_count_hist"])})
        for key, bounds in self.summary["intervals"].items():
            if bounds is not None:
                metrics.update({f"eval/{key}_low": bounds[0], f"eval/{key}_high": bounds[1]})
        self.trainer.logger.log_metrics(metrics)
