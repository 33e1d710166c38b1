"""Evaluation (``propel test``): summary numbers, base-vs-trained comparison, resumable tiny-scale runs."""

from __future__ import annotations

import json

import lightning.pytorch as pl
import pytest

from propel.datamodules.task_pool import TaskPoolDataModule
from propel.domains.interface import Domain, ParseFailure, Verdict
from propel.domains.trials import SolverSpec
from propel.lit_modules.evaluation import EvaluationModule
from propel.metrics.diversity import distinct_n, nltk_self_bleu_scores
from propel.metrics.intervals import bootstrap, jackknife, wilson
from propel.pools import evaluation_summary
from propel.records import Context, Prompt, Task


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
    """The paper's definitions keep their names (utility and diversity over all generations); valid-only variants
    carry ``_valid``; every rate has its Wilson interval and every Self-BLEU mean a bootstrap interval."""
    texts = ["the cat sat on the mat", "a dog ran in the park today", "the cat sat on the rug", "the cat sat on a log"]
    summary = evaluation_summary(
        valid=[True, True, False, True],
        solve_counts=[2, 0, None, 4],
        task_texts=texts,
        topics=["x", "y", None, "x"],
        n_trials=4,
        band=(1, 3),
    )
    valid_texts = [texts[0], texts[1], texts[3]]
    assert summary["valid_rate"] == 0.75 and summary["in_band"] == 1
    assert summary["utility"] == 0.25 and summary["utility_valid"] == pytest.approx(1 / 3)
    assert summary["solve_count_hist"] == [1, 0, 1, 0, 1]
    assert summary["top_topic_rate"] == 0.5 and summary["top_topic_rate_valid"] == pytest.approx(2 / 3)
    assert summary["self_bleu_3"] == pytest.approx(float(nltk_self_bleu_scores(texts, 3).mean()))
    assert summary["self_bleu_3_valid"] == pytest.approx(float(nltk_self_bleu_scores(valid_texts, 3).mean()))
    assert summary["self_bleu_3"] != pytest.approx(summary["self_bleu_3_valid"])  # the invalid near-copy counts
    assert summary["distinct_3"] == pytest.approx(distinct_n(texts, 3))
    assert summary["distinct_3_valid"] == pytest.approx(distinct_n(valid_texts, 3))
    intervals = summary["intervals"]
    assert intervals["valid_rate"] == pytest.approx([wilson(3, 4).low, wilson(3, 4).high])
    assert intervals["utility"] == pytest.approx([wilson(1, 4).low, wilson(1, 4).high])
    assert intervals["utility_valid"] == pytest.approx([wilson(1, 3).low, wilson(1, 3).high])
    scores = nltk_self_bleu_scores(texts, 3)
    expected = bootstrap(scores, n_resamples=2000, seed=0)
    assert intervals["self_bleu_3"] == pytest.approx([expected.low, expected.high])
    # Distinct-3: a jackknife interval over the texts, from each text left out in turn (recomputed here by brute force)
    loo = [distinct_n(texts[:i] + texts[i + 1 :], 3) for i in range(len(texts))]
    expected = jackknife(summary["distinct_3"], loo)
    assert intervals["distinct_3"] == pytest.approx([expected.low, expected.high])
    assert intervals["distinct_3"][0] < summary["distinct_3"] < intervals["distinct_3"][1]


def test_per_task_metrics_are_means_with_bootstrap_intervals():
    """A domain's per-task numbers (SWE: diff size) get ``<name>_mean`` and the bootstrap interval of the Self-BLEU
    means; one valid task has a mean but nothing to resample."""
    args = ([True, True, False], [1, 2, None], ["a b c", "d e f", "x"], ["t", "u", None], 4, (1, 2))
    summary = evaluation_summary(*args, task_metrics={"diff_lines": [2.0, 6.0], "failing_tests": [3.0]})
    assert summary["diff_lines_mean"] == 4.0 and summary["failing_tests_mean"] == 3.0
    ci = bootstrap([2.0, 6.0], n_resamples=2000, confidence=0.95, seed=0)
    assert summary["intervals"]["diff_lines_mean"] == [ci.low, ci.high]
    assert summary["intervals"]["failing_tests_mean"] is None


def test_degenerate_diversity_has_no_value_not_zero():
    """One valid task: no Self-BLEU among valid tasks (None, not 0.0 = "maximally diverse"), no topic share."""
    summary = evaluation_summary([True, False], [1, None], ["a b c d", "x"], [None, None], 2, (1, 1))
    assert summary["self_bleu_3_valid"] is None and summary["intervals"]["self_bleu_3_valid"] is None
    assert summary["top_topic_rate"] is None and summary["top_topic_rate_valid"] is None
    assert summary["distinct_3"] == 1.0 and summary["self_bleu_3"] == 0.0  # 2 texts: defined
    empty = evaluation_summary([False, False], [None, None], ["", ""], [None, None], 2, (1, 1))
    assert empty["utility_valid"] is None and empty["utility"] == 0.0 and empty["distinct_3"] is None
    assert empty["intervals"]["distinct_3"] is None
    assert empty["intervals"]["utility"] == pytest.approx([0.0, wilson(0, 2).high])


def _evaluate(model_dir, out, n_tasks, adapter=None, n_trials=4, batch_size=3) -> EvaluationModule:
    domain = EchoDomain()
    module = EvaluationModule(
        domain,
        generator=str(model_dir),
        adapter=adapter,
        output_dir=str(out),
        solver=SolverSpec(n_trials=n_trials, band=(1, 2), max_new_tokens=5),
        max_new_tokens=6,
    )
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.test(
        module, datamodule=TaskPoolDataModule(domain, pool_dir=str(out), n_tasks=n_tasks, seed=1, batch_size=batch_size)
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
    assert summary["utility"] == pytest.approx(summary["in_band"] / summary["tasks"])
    assert summary["utility_valid"] == pytest.approx(summary["in_band"] / summary["valid"])
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert len(scores["self_bleu_3"]) == 6  # one per generation, valid or not


def test_a_run_stopped_after_its_last_rows_finishes_on_rerun(tiny_model_dir, tmp_path):
    """Killed after the last part was written but before the summary: the rerun has no batch left (Lightning skips
    the test loop and its hooks), yet it writes the same summary from the rows on disk, generating nothing."""
    first = _evaluate(tiny_model_dir, tmp_path, n_tasks=3)
    (tmp_path / "summary.json").unlink()
    (tmp_path / "scores.json").unlink()
    parts = sorted(tmp_path.glob("part-*.parquet"))
    rerun = _evaluate(tiny_model_dir, tmp_path, n_tasks=3)
    assert sorted(tmp_path.glob("part-*.parquet")) == parts  # nothing generated
    summary = json.loads((tmp_path / "summary.json").read_text())
    keep = ("seconds", "tasks_per_s", "solver_tokens", "solver_tokens_per_s")  # this run's throughput: none
    assert {k: v for k, v in summary.items() if k not in keep} == json.loads(
        json.dumps({k: v for k, v in first.summary.items() if k not in keep})
    )
    assert rerun.summary["tasks"] == 3 and (tmp_path / "scores.json").exists()


def test_a_rerun_with_other_settings_is_refused_but_batch_size_may_change(tiny_model_dir, tmp_path):
    """The folder's settings.json records what its rows were made with: a rerun with another solver (or seed,
    adapter, domain) stops with one line; a throughput setting such as the batch size does not count."""
    from propel.errors import ConfigError

    _evaluate(tiny_model_dir, tmp_path, n_tasks=2)
    manifest = json.loads((tmp_path / "settings.json").read_text())
    assert manifest["solver"]["n_trials"] == 4 and manifest["context_seed"] == 1 and manifest["adapter"] is None
    with pytest.raises(ConfigError, match=r"other settings \(solver.n_trials: 4 -> 2\)") as err:
        _evaluate(tiny_model_dir, tmp_path, n_tasks=3, n_trials=2)
    assert "\n" not in str(err.value)
    assert len(list(tmp_path.glob("part-*.parquet"))) == 1  # nothing was generated into the old folder
    second = _evaluate(tiny_model_dir, tmp_path, n_tasks=3, batch_size=1)
    assert second.summary["tasks"] == 3
