"""Labeling as a predict job: rows per context, solver trials on valid tasks, Parquet pool, resume after a kill."""

from __future__ import annotations

import itertools
import json
import logging

import pandas as pd
import pytest
from lightning.pytorch import Callback, Trainer

from propel.callbacks.pool_writer import PoolWriter
from propel.datamodules.task_pool import TaskPoolDataModule
from propel.domains.exact_trials import solve_probabilities
from propel.domains.math import MathExpressionDomain
from propel.domains.trials import SolverSpec, in_band
from propel.engines.scripted import ScriptedEngine
from propel.engines.tool_calls import ToolCall, format_tool_call
from propel.envs import ToolEnv
from propel.lit_modules.labeling import LabelingModule
from propel.pools import pool_summary, read_pool
from propel.records import Task
from propel.rollouts import AgentSolver
from propel.rollouts.scorer import CUT


class FixedTaskDomain(MathExpressionDomain):
    """Every completion parses to the same valid task, so the solver path runs even with a random tiny generator."""

    name = "fixed"
    cut_completions_invalid = False  # the tiny random generator never stops before its 12 tokens

    def parse(self, completion):
        return Task(domain=self.name, data={"problem": "What is 2 + 3?", "expression": "2 + 3"})


class Kill(Callback):
    """Stops the run after ``after`` batches, as a crash would (the batch in flight is lost)."""

    def __init__(self, after: int):
        self.after = after

    def on_predict_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        if batch_idx + 1 >= self.after:
            raise RuntimeError("killed")


def label(model_dir, out, domain, n_tasks=8, batch_size=2, n_trials=2, callbacks=(), **kw):
    module = LabelingModule(
        domain,
        generator=str(model_dir),
        solver=SolverSpec(n_trials=n_trials, band=(1, 1), max_new_tokens=8),
        max_new_tokens=12,
        **kw,
    )
    trainer = Trainer(
        accelerator="cpu", logger=False, enable_progress_bar=False, callbacks=[PoolWriter(str(out)), *callbacks]
    )
    trainer.predict(
        module,
        datamodule=TaskPoolDataModule(domain, pool_dir=str(out), n_tasks=n_tasks, batch_size=batch_size),
        return_predictions=False,
    )
    return module


def test_in_band():
    assert [in_band(k, (1, 3)) for k in range(9)] == [False, True, True, True] + [False] * 5


def test_solver_trials_and_rows(tiny_model_dir, tmp_path):
    module = label(tiny_model_dir, tmp_path / "pool", FixedTaskDomain(), n_tasks=3, n_trials=3)
    pool = read_pool(tmp_path / "pool")
    assert sorted(pool["id"]) == [f"fixed-0-{i}" for i in range(3)]  # ids carry the domain's name
    assert pool["valid"].all() and (pool["reason"] == "ok").all()
    assert all(len(g) == 3 for g in pool["grades"])
    assert (pool["solve_count"] == [sum(g) for g in pool["grades"]]).all()
    assert (pool["label"] == [int(c == 1) for c in pool["solve_count"]]).all()
    assert json.loads(pool["task"][0])["data"]["answer"] == 5
    assert (pool["solver_tokens"] > 0).all() and module.throughput()["solver_tokens"] == pool["solver_tokens"].sum()
    summary = json.loads((tmp_path / "pool" / "summary.json").read_text())
    assert summary["tasks"] == 3 and summary["valid_rate"] == 1.0 and sum(summary["solve_count_hist"]) == 3


def test_exact_p_is_recorded_where_the_domain_gives_an_answer_text(tiny_model_dir, tmp_path):
    few_shot = FixedTaskDomain(solver_format="few_shot")
    module = label(tiny_model_dir, tmp_path / "a", few_shot, n_tasks=2, n_trials=2)
    pool = read_pool(tmp_path / "a")
    want = solve_probabilities(few_shot, [Task.from_json(t) for t in pool["task"]], module.solver_engine)
    assert pool["exact_p"].tolist() == pytest.approx(want) and all(0 < p < 1 for p in want)
    label(tiny_model_dir, tmp_path / "b", FixedTaskDomain(), n_tasks=2, n_trials=2)  # chat solver: no answer text
    assert read_pool(tmp_path / "b")["exact_p"].isna().all()
    label(tiny_model_dir, tmp_path / "c", few_shot, n_tasks=2, n_trials=2, exact_p=False)
    assert read_pool(tmp_path / "c")["exact_p"].isna().all()


def test_resume_after_kill_redoes_nothing(tiny_model_dir, tmp_path, caplog):
    out = tmp_path / "pool"
    with pytest.raises(RuntimeError, match="killed"):
        label(tiny_model_dir, out, MathExpressionDomain(), callbacks=[Kill(after=2)])
    first = read_pool(out)
    assert len(first) == 4  # two batches of two were written before the kill
    with caplog.at_level(logging.INFO):
        label(tiny_model_dir, out, MathExpressionDomain())
    assert f"resuming: 4 of 8 tasks already in {out}, labeling the other 4" in caplog.text
    pool = read_pool(out)
    assert sorted(pool["id"]) == sorted(f"math_expression-0-{i}" for i in range(8))
    parts = sorted(out.glob("part-*.parquet"))
    raw = sum(len(pd.read_parquet(p)) for p in parts)
    assert raw == 8  # no id written twice
    kept = pool.set_index("id").loc[first["id"], "completion"].tolist()
    assert kept == first["completion"].tolist()  # rows of the first run are untouched
    label(tiny_model_dir, out, MathExpressionDomain())  # a third run has nothing left to do
    assert len(list(out.glob("part-*.parquet"))) == len(parts)


def test_pool_summary_histogram():
    frame = pd.DataFrame(
        {
            "valid": [True, True, False, True, False, False],
            "reason": ["ok", "ok", "degenerate:answer_stated", "ok", "syntax_error", "degenerate:answer_stated"],
            "solve_count": [0, 2, 5, 2, None, 8],  # degenerate tasks are tried too (the lenient yield)
            "label": [0, 1, 0, 1, None, 0],
        }
    )
    assert pool_summary(frame, 8) == {
        "tasks": 6,
        "valid": 3,
        "valid_rate": 0.5,
        "degenerate": 2,
        "solve_count_hist": [1, 0, 2, 0, 0, 0, 0, 0, 0],  # over valid tasks only
        "positives": 2,
        "positive_share": 2 / 3,
        "invalid_reasons": {"degenerate:answer_stated": 2, "syntax_error": 1},
    }


@pytest.mark.real_model
def test_real_model_labels_expression_tasks(bundled_dir, tmp_path):
    label(bundled_dir, tmp_path / "pool", MathExpressionDomain(), n_tasks=8, batch_size=8, n_trials=4)
    pool = read_pool(tmp_path / "pool")
    assert len(pool) == 8
    valid = pool[pool["valid"]]
    assert all(len(g) == 4 for g in valid["grades"])
    assert set(pool["reason"]) <= {
        "ok",
        "no_expression",
        "empty_problem",
        "empty_expression",
        "not_whole_number",
        "not_arithmetic",
        "syntax_error",
        "division_by_zero",
        "bad_exponent",
        "too_large",
        "problem_too_long",
        "expression_too_long",
        "answer_too_large",
        "bad_operator",
        CUT,  # 12 new tokens: most completions are cut, and a cut task is invalid
    }


def test_agent_solver_labels_from_episodes(tiny_model_dir, tokenizer, tmp_path):
    """``solver_agent``: each trial is an agent episode in a sandbox session, graded by the domain (scripted agent:
    one of three trials writes the right answer), written to the pool like completion trials."""
    counter = itertools.count()

    def script(prompt: str) -> str:
        if "answer.txt" not in prompt:  # the generator (FixedTaskDomain parses anything to "What is 2 + 3?")
            return "a task"
        if prompt.count("<|im_start|>assistant") > 1:
            return format_tool_call(ToolCall("submit", {}))
        answer = "5" if next(counter) % 3 == 0 else "4"
        return format_tool_call(ToolCall("write_file", {"path": "answer.txt", "content": f"Answer: {answer}"}))

    domain = FixedTaskDomain(solver_format="chat")
    module = LabelingModule(
        domain,
        generator=str(tiny_model_dir),
        solver=SolverSpec(n_trials=3, band=(1, 1), max_new_tokens=64),
        solver_agent=AgentSolver(lambda: ToolEnv(max_turns=3), concurrency=3),
    )
    module.engines[str(tiny_model_dir)] = ScriptedEngine(tokenizer, script)  # generator and solver
    out = tmp_path / "pool"
    trainer = Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, callbacks=[PoolWriter(str(out))])
    trainer.predict(
        module,
        datamodule=TaskPoolDataModule(domain, pool_dir=str(out), n_tasks=2, batch_size=2),
        return_predictions=False,
    )
    pool = read_pool(out)
    assert [list(g) for g in pool["grades"]] == [[True, False, False]] * 2
    assert list(pool["solve_count"]) == [1, 1] and list(pool["label"]) == [1, 1]
    assert (pool["solver_tokens"] > 0).all() and module.sandbox is None  # the sandbox it started is stopped


@pytest.mark.real_model
def test_real_model_agent_labeling_config(bundled_dir, tmp_path):
    """configs/math/label_agent.yaml as a user runs it (smaller): the bundled model as generator and agent solver."""
    from propel.cli import main

    out = tmp_path / "pool"
    code = main(
        [
            "predict",
            "-c",
            "configs/math/label_agent.yaml",
            f"--trainer.callbacks.init_args.output_dir={out}",
            f"--trainer.default_root_dir={out}",
            "--data.init_args.n_tasks=3",
            "--data.init_args.batch_size=3",
            "--model.init_args.solver.n_trials=2",
            "--model.init_args.solver.band=[1, 1]",
            "--model.init_args.solver.max_new_tokens=48",
            "--model.init_args.solver_agent.init_args.env.init_args.max_turns=2",
        ]
    )
    assert code in (0, None)
    pool = read_pool(out)
    assert len(pool) == 3
    valid = pool[pool["valid"]]
    assert all(len(g) == 2 for g in valid["grades"]) and (valid["solver_tokens"] > 0).all()


def test_an_adapter_labels_the_trained_policys_tasks_and_the_solver_stays_the_base(tiny_model_dir, tmp_path):
    """``adapter`` merges a LoRA adapter into the generator only: the same seeded contexts give other completions
    than the base generator's, and the solver (the same model name) is still the untrained one."""
    from peft import LoraConfig, get_peft_model

    from propel.models import load_model

    model, _ = load_model(str(tiny_model_dir))
    policy = get_peft_model(model, LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    (adapter := tmp_path / "adapter").mkdir()
    policy.save_pretrained(adapter)

    domain = FixedTaskDomain()  # every task valid: the solver runs on each
    base = label(tiny_model_dir, tmp_path / "base", domain, n_tasks=4)
    trained = label(tiny_model_dir, tmp_path / "trained", domain, n_tasks=4, adapter=str(adapter))
    base_rows, trained_rows = read_pool(tmp_path / "base"), read_pool(tmp_path / "trained")
    assert list(base_rows["id"]) == list(trained_rows["id"])  # the same contexts, seeded alike
    assert list(base_rows["completion"]) != list(trained_rows["completion"])
    assert set(trained.engines) == {str(tiny_model_dir), f"{tiny_model_dir}+{adapter}"}
    assert trained.solver_engine is trained.engines[str(tiny_model_dir)] is not trained.generator_engine
    assert set(base.engines) == {str(tiny_model_dir)} and base.generator_engine is base.solver_engine
