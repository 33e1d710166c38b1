"""Evaluation as ``propel test``: fresh tasks from a policy, n real solver trials each, utility and diversity.

``EvaluationModule`` is the labeling job (``LabelingModule``: generate, validity, n solver trials, grade) with the
generator optionally carrying a LoRA adapter (a peft folder or a GRPO checkpoint); ``TaskPoolDataModule`` feeds it
fresh contexts (a seed apart from labeling's, ``pool_dir`` = ``output_dir``). Labeled rows go to Parquet parts in
``output_dir`` as they are made (a rerun skips contexts already there), then a ``summary.json``
(``propel.pools.evaluation_summary``).
"""

from __future__ import annotations

import json
from pathlib import Path

from propel.domains.base import Context, Domain, Task
from propel.lit_modules.labeling import LabelingModule
from propel.pools.io import read_pool, write_part
from propel.pools.summary import evaluation_summary, print_summary_table

SUMMARY = "summary.json"


class EvaluationModule(LabelingModule):
    """``propel test``: label fresh tasks from a (possibly LoRA-adapted) generator and summarize them.

    Args:
        domain: the task domain.
        adapter: LoRA adapter of the trained policy (peft folder or GRPO ``.ckpt``); None evaluates the base.
        output_dir: where labeled rows (``part-*.parquet``) and ``summary.json`` go; a rerun resumes.
        **kwargs: as ``LabelingModule`` (generator, solver, engine, sampling, sandbox, ...).
    """

    def __init__(self, domain: Domain, adapter: str | None = None, output_dir: str = "runs/eval/policy", **kwargs):
        super().__init__(domain, **kwargs)
        self.output_dir = Path(output_dir)
        self.summary: dict = {}

    def on_test_start(self) -> None:
        hp = self.hparams
        # the trained generator is base + adapter (merged); the solver and oracle stay the untrained base
        trained = self._build_engine(hp.generator, hp.adapter) if hp.adapter is not None else None
        if trained is not None:
            self.engines[f"{hp.generator}+{hp.adapter}"] = trained
        self.start(generator_engine=trained)

    def test_step(self, batch: list[Context], batch_idx: int = 0) -> None:
        rows = self.predict_step(batch, batch_idx)
        if rows:  # every rank writes its own parts (rank in the name)
            write_part(self.output_dir, rows, rank=self.trainer.global_rank)

    def on_test_end(self) -> None:
        self.stop()
        if self.trainer.global_rank != 0:
            return
        frame = read_pool(self.output_dir)
        valid = [bool(v) for v in frame["valid"]]
        texts = [
            self.domain.render(Task.from_json(t)) if ok else None for t, ok in zip(frame["task"], valid, strict=True)
        ]
        counts = [None if c is None or c != c else int(c) for c in frame["solve_count"]]
        self.summary = evaluation_summary(valid, counts, texts, list(frame["topic"]), self.n_trials, self.band)
        self.summary.update({"generator": self.hparams.generator, "adapter": self.hparams.adapter, **self.throughput()})
        (self.output_dir / SUMMARY).write_text(json.dumps(self.summary, indent=1))
        print_summary_table(dict(self.summary), f"evaluation ({self.output_dir})")
        if self.trainer.logger is not None:
            metrics = {f"eval/{k}": float(v) for k, v in self.summary.items() if isinstance(v, (int, float))}
            metrics.update({f"eval/solve_count_{k}": float(c) for k, c in enumerate(self.summary["solve_count_hist"])})
            self.trainer.logger.log_metrics(metrics)
