"""Evaluation (``propel test``): summary numbers, base-vs-trained comparison, resumable tiny-scale runs."""

from __future__ import annotations

import json

import lightning.pytorch as pl
import pytest

from propel.datamodules.task_pool import TaskPoolDataModule
from propel.domains.base import Context, Domain, ParseFailure, Task, Verdict
from propel.domains.trials import SolverSpec
from propel.engines.base import Prompt
from propel.lit_modules.evaluation import EvaluationModule
from propel.metrics.diversity import distinct_n, nltk_self_bleu_scores
from propel.pools import evaluation_summary


class EchoDomain(Domain):
    """Any non-blank completion is a task (valid when longer than 2 characters); a solver attempt passes when its
    length is even: a tiny random model then produces a spread of solve counts."""

    name, needs_sandbox = "echo", False

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        return [Context(id=f"echo-{seed}-{i}", prompt=Prompt(text=f"Item {seed}.{i}:")) for i in range(n)]

    def parse(self, completion: str):
        text = completion.strip()
        return Task(self.name, {"text": text}) if text else ParseFailure("blank")

    def validity(self, tasks, sandbox=None) -> list[Verdict]:
        return [Verdict(len(t.data["text"]) > 2, "ok") for t in tasks]

    def solver_prompt(self, task) -> Prompt:
        return Prompt(text=task.data["text"])

    def grade(self, task, completions, sandbox=None) -> list[bool]:
        return [len(c) % 2 == 0 for c in completions]

    def topic(self, task) -> str:
        return task.data["text"][0]


def test_summary_numbers():
    texts = ["the cat sat on the mat", "a dog ran in the park today", None, "the cat sat on a log"]
    summary = evaluation_summary(
        valid=[True, True, False, True],
        solve_counts=[2, 0, None, 4],
        task_texts=texts,
        topics=["x", "y", None, "x"],
        n_trials=4,
        band=(1, 3),
    )
    valid_texts = [t for t in texts if t]
    assert summary["valid_rate"] == 0.75 and summary["in_band"] == 1
    assert summary["utility"] == pytest.approx(1 / 3) and summary["utility_all"] == 0.25
    assert summary["solve_count_hist"] == [1, 0, 1, 0, 1]
    assert summary["top_topic_rate"] == pytest.approx(2 / 3)
    assert summary["self_bleu_3"] == pytest.approx(float(nltk_self_bleu_scores(valid_texts, 3).mean()))
    assert summary["distinct_3"] == pytest.approx(distinct_n(valid_texts, 3))


def _evaluate(model_dir, out, n_tasks, adapter=None) -> EvaluationModule:
    domain = EchoDomain()
    module = EvaluationModule(
        domain,
        generator=str(model_dir),
        adapter=adapter,
        output_dir=str(out),
        solver=SolverSpec(n_trials=4, band=(1, 3), max_new_tokens=5),
        generator_max_new_tokens=6,
    )
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.test(
        module, datamodule=TaskPoolDataModule(domain, pool_dir=str(out), n_tasks=n_tasks, seed=1, batch_size=3)
    )
    return module


def test_evaluation_run_resumes_and_summarizes(tiny_model_dir, tmp_path):
    first = _evaluate(tiny_model_dir, tmp_path, n_tasks=3)
    assert len(list(tmp_path.glob("part-*.parquet"))) == 1 and first.summary["tasks"] == 3
    second = _evaluate(tiny_model_dir, tmp_path, n_tasks=6)  # only the 3 new contexts are generated
    assert len(list(tmp_path.glob("part-*.parquet"))) == 2
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary == json.loads(json.dumps(second.summary))
    assert summary["tasks"] == 6 and sum(summary["solve_count_hist"]) == summary["valid"] > 0
    assert summary["utility"] == pytest.approx(summary["in_band"] / summary["valid"])
