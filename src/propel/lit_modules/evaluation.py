"""Evaluation as ``propel test``: fresh tasks from a policy, n real solver trials each, utility and diversity.

``EvaluationModule`` is the labeling job (``LabelingModule``: generate, validity, n solver trials, grade) with the
generator optionally carrying a LoRA adapter (a peft folder or a GRPO checkpoint); ``EvaluationData`` feeds it fresh
contexts. Labeled rows go to Parquet parts in ``output_dir`` as they are made (a rerun skips contexts already there),
then a ``summary.json``. ``compare(base, trained)`` puts two summaries side by side (markdown + histogram PNG).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lightning.pytorch import LightningDataModule
from torch.utils.data import DataLoader

from propel.domains.base import Context, Domain, Task
from propel.domains.trials import in_band
from propel.errors import ConfigError
from propel.lit_modules.labeling import LabelingModule
from propel.sandbox.base import Sandbox

SUMMARY = "summary.json"
COMPARED = (
    "tasks",
    "valid_rate",
    "utility",
    "utility_all",
    "self_bleu_3",
    "distinct_3",
    "top_topic_rate",
    "solve_count_hist",
)


def evaluation_summary(
    valid: Sequence[bool],
    solve_counts: Sequence[int | None],
    task_texts: Sequence[str | None],
    topics: Sequence[str | None],
    n_trials: int,
    band: tuple[int, int],
) -> dict:
    """Utility (share of valid tasks in band; ``utility_all``: of all generations), validity, diversity, histogram.

    One entry per generation in each sequence; solve counts, texts and topics are read for valid ones only.
    """
    from propel.metrics.diversity import distinct_n, self_bleu, top_topic_rate

    rows = [i for i, ok in enumerate(valid) if ok]
    counts = [int(solve_counts[i]) for i in rows]
    texts = [task_texts[i] or "" for i in rows]
    hits = sum(in_band(c, band) for c in counts)
    return {
        "tasks": len(valid),
        "valid": len(rows),
        "valid_rate": len(rows) / len(valid) if valid else 0.0,
        "in_band": hits,
        "utility": hits / len(rows) if rows else 0.0,
        "utility_all": hits / len(valid) if valid else 0.0,
        "self_bleu_3": self_bleu(texts, 3) if len(texts) > 1 else 0.0,
        "distinct_3": distinct_n(texts, 3) if texts else 0.0,
        "top_topic_rate": top_topic_rate([topics[i] for i in rows]) if rows else 0.0,
        "solve_count_hist": [counts.count(k) for k in range(n_trials + 1)],
        "n_trials": n_trials,
        "band": list(band),
    }


def compare(
    base: Mapping,
    trained: Mapping,
    output_dir: str | Path | None = None,
    names: tuple[str, str] = ("base", "trained"),
) -> str:
    """Markdown table of two evaluation summaries side by side; with ``output_dir`` also writes ``compare.md`` and
    ``solve_counts.png`` (the two solve-count histograms) there."""
    from propel.pipeline.report import markdown_table, plot_histograms

    rows = [{"metric": key, names[0]: base.get(key), names[1]: trained.get(key)} for key in COMPARED]
    table = markdown_table(rows, ["metric", *names])
    if output_dir is not None:
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(table)
        hists = {names[0]: base["solve_count_hist"], names[1]: trained["solve_count_hist"]}
        plot_histograms(hists, out / "solve_counts.png", title=f"solve count of {base.get('n_trials', '')} trials")
    return table


def _list_collate(batch: list[Context]) -> list[Context]:
    return batch


class EvaluationData(LightningDataModule):
    """Fresh generator contexts for ``propel test``, minus those already in the module's ``output_dir``.

    Args:
        n_tasks: generations to evaluate (one per context).
        seed: context seed (keep it apart from the training and labeling seeds).
        batch_size: contexts per test step (one Parquet part per step).
    """

    def __init__(self, n_tasks: int = 64, seed: int = 1, batch_size: int = 8):
        super().__init__()
        if n_tasks < 1 or batch_size < 1:
            raise ConfigError(f"data.n_tasks and data.batch_size must be >= 1, got {n_tasks}, {batch_size}")
        self.n_tasks, self.seed, self.batch_size = n_tasks, seed, batch_size
        self.skipped = 0

    def test_dataloader(self) -> DataLoader:
        from propel.datamodules.task_pool import read_pool

        module = self.trainer.lightning_module
        if not isinstance(module, EvaluationModule):
            raise ConfigError("EvaluationData serves propel.lit_modules.evaluation.EvaluationModule only")
        done = set(read_pool(module.output_dir)["id"])
        contexts = module.domain.contexts(self.n_tasks, self.seed)
        todo = [c for c in contexts if c.id not in done]
        self.skipped = len(contexts) - len(todo)
        return DataLoader(todo, batch_size=self.batch_size, shuffle=False, collate_fn=_list_collate)


class EvaluationModule(LabelingModule):
    """``propel test``: label fresh tasks from a (possibly LoRA-adapted) generator and summarize them.

    Args:
        domain: the task domain.
        generator: the base generator model.
        adapter: LoRA adapter of the trained policy (peft folder or GRPO ``.ckpt``); None evaluates the base.
        output_dir: where labeled rows (``part-*.parquet``) and ``summary.json`` go; a rerun resumes.
        Other arguments as ``LabelingModule`` (solver, n_trials, band, sampling, sandbox).
    """

    def __init__(
        self,
        domain: Domain,
        generator: str = "smollm2-135m-instruct",
        adapter: str | None = None,
        output_dir: str = "runs/eval/policy",
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
        super().__init__(
            domain,
            generator=generator,
            solver=solver,
            oracle=oracle,
            engine=engine,
            engine_kwargs=engine_kwargs,
            n_trials=n_trials,
            band=band,
            generator_max_new_tokens=generator_max_new_tokens,
            generator_temperature=generator_temperature,
            solver_max_new_tokens=solver_max_new_tokens,
            solver_temperature=solver_temperature,
            top_p=top_p,
            dtype=dtype,
            seed=seed,
            sandbox=sandbox,
        )
        from propel.callbacks.pool_writer import PoolWriter

        self.writer = PoolWriter(output_dir)
        self.summary: dict = {}

    @property
    def output_dir(self) -> Path:
        return self.writer.output_dir

    def on_test_start(self) -> None:
        hp = self.hparams
        if hp.adapter is None:
            self.on_predict_start()
            return
        # the trained generator is base + adapter (merged); the solver and oracle stay the untrained base
        self.engines[f"{hp.generator}+{hp.adapter}"] = self._build_engine(hp.generator, hp.adapter)
        self.on_predict_start()
        self.generator_engine = self.engines[f"{hp.generator}+{hp.adapter}"]

    def test_step(self, batch: list[Context], batch_idx: int = 0) -> None:
        rows = self.predict_step(batch, batch_idx)
        self.writer.write_on_batch_end(self.trainer, self, rows, None, batch, batch_idx)

    def on_test_end(self) -> None:
        self.on_predict_end()
        if self.trainer.global_rank != 0:
            return
        from propel.datamodules.task_pool import read_pool

        frame = read_pool(self.output_dir)
        valid = [bool(v) for v in frame["valid"]]
        texts = [
            self.domain.render(Task.from_json(t)) if ok else None for t, ok in zip(frame["task"], valid, strict=True)
        ]
        counts = [None if c is None or c != c else int(c) for c in frame["solve_count"]]
        self.summary = evaluation_summary(valid, counts, texts, list(frame["topic"]), self.n_trials, self.band)
        self.summary.update({"generator": self.hparams.generator, "adapter": self.hparams.adapter, **self.throughput()})
        (self.output_dir / SUMMARY).write_text(json.dumps(self.summary, indent=1))
        _print(self.summary, self.output_dir)
        if self.trainer.logger is not None:
            metrics = {f"eval/{k}": float(v) for k, v in self.summary.items() if isinstance(v, (int, float))}
            metrics.update({f"eval/solve_count_{k}": float(c) for k, c in enumerate(self.summary["solve_count_hist"])})
            self.trainer.logger.log_metrics(metrics)


def _print(summary: Mapping, output_dir: Path) -> None:
    from propel.callbacks.pool_writer import print_summary_table

    print_summary_table(dict(summary), f"evaluation ({output_dir})")


def compare_dirs(base_dir: str | Path, trained_dir: str | Path, output_dir: str | Path) -> str:
    """``compare`` of the ``summary.json`` files two ``propel test`` runs wrote."""
    base = json.loads((Path(base_dir) / SUMMARY).read_text())
    trained = json.loads((Path(trained_dir) / SUMMARY).read_text())
    return compare(base, trained, output_dir)


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 4:
        raise SystemExit("usage: python -m propel.lit_modules.evaluation BASE_EVAL_DIR TRAINED_EVAL_DIR OUTPUT_DIR")
    print(compare_dirs(*sys.argv[1:]))
