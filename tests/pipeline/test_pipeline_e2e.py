"""End to end: ``propel pipeline`` at toy scale (tiny model) writes every stage's files and the report.

The tiny random model writes no valid task, so the pool is seeded with hand-written labeled tasks under the
context ids the label stage would use: the label stage then resumes with nothing left to do, exactly as after a
finished or killed real run, and every later stage runs for real on the tiny model.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest

from propel.domains import MathExpressionDomain
from propel.domains.base import Task
from propel.pipeline.config import load_pipeline_config
from propel.pipeline.run import run_pipeline

PROBLEMS = [
    ("Tom has {a} apples and buys {b} more. How many apples does he have?", "{a} + {b}"),
    ("A box holds {a} pens. How many pens are in {b} boxes?", "{a} * {b}"),
]


def _seed_pool(pool_dir, n_tasks: int, seed: int) -> None:
    domain = MathExpressionDomain()
    rows = []
    for i, ctx in enumerate(domain.contexts(n_tasks, seed)):
        problem, expression = PROBLEMS[i % 2]
        completion = f" {problem.format(a=i + 2, b=3)}\nExpression: {expression.format(a=i + 2, b=3)}"
        task = domain.parse(completion)
        assert isinstance(task, Task) and domain.validity([task])[0].ok
        label = i % 2
        solve_count = 2 if label else 0
        rows.append(
            {
                "id": ctx.id,
                "group": ctx.group,
                "domain": domain.name,
                "context": "{}",
                "completion": completion,
                "task": task.to_json(),
                "valid": True,
                "reason": "ok",
                "grades": [True] * solve_count + [False] * (4 - solve_count),
                "solve_count": solve_count,
                "label": label,
                "topic": domain.topic(task),
                "n_trials": 4,
                "solver_tokens": 0,
            }
        )
    pool_dir.mkdir(parents=True)
    pd.DataFrame(rows).to_parquet(pool_dir / "part-0-r0-seed.parquet")


@pytest.fixture()
def toy_config(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    workdir = tmp_path / "run"
    overrides = [
        f"workdir={workdir}",
        f"model={tiny_model_dir}",
        "label.n_tasks=24",
        "label.n_trials=4",
        "label.band=[1,2]",
        "label.generator_max_new_tokens=8",
        "label.solver_max_new_tokens=8",
        "probe.layers=[1,2]",
        "probe.poolings=[last_token,mean_full]",
        "probe.archs=[linear]",
        "probe.balances=[weighted]",
        "probe.seeds=[0]",
        "probe.rvp_contexts=2",
        "probe.rvp_group_size=2",
        "grpo.max_steps=2",
        "grpo.contexts_per_step=1",
        "grpo.group_size=2",
        "grpo.max_new_tokens=8",
        "grpo.checkpoint_every=1",
        "evaluate.n_tasks=4",
        "evaluate.n_trials=2",
        "evaluate.batch_size=4",
    ]
    cfg = load_pipeline_config(None, overrides)
    _seed_pool(workdir / "label" / "pool", cfg.label.n_tasks, cfg.seed)
    return cfg


def test_pipeline_runs_every_stage_and_writes_the_report(toy_config):
    cfg = toy_config
    summaries = run_pipeline(cfg)
    root = cfg.root
    assert set(summaries) == {"label", "probe", "grpo", "evaluate"}
    for stage in ("label", "probe", "grpo", "evaluate"):
        assert (root / stage / "summary.json").exists()
    # label: the seeded pool was complete, so nothing new was generated and the summary reflects it
    assert summaries["label"]["tasks"] == 24 and summaries["label"]["positives"] == 12
    # probe: cache, sweep table, heatmap, reliability diagram, loadable artifact
    from propel.probes import ProbeArtifact

    artifact = ProbeArtifact.load(root / "probe" / "artifact")
    assert artifact.layer in (1, 2) and artifact.pooling in ("last_token", "mean_full")
    assert (root / "probe" / "sweep" / "sweep.csv").exists() and (root / "probe" / "reliability.png").exists()
    # grpo: checkpoints, peft adapters, W&B offline run, per-step metrics
    assert (root / "grpo" / "checkpoints" / "last.ckpt").exists()
    assert (root / "grpo" / "adapters" / "step-2" / "adapter_config.json").exists()
    assert summaries["grpo"]["steps"] == 2 and len(summaries["grpo"]["curves"]["reward"]) == 2
    # evaluate: base and trained, side by side
    for name in ("base", "trained"):
        result = json.loads((root / "evaluate" / name / "summary.json").read_text())
        assert result["tasks"] == 4 and len(result["solve_count_hist"]) == 3
    report = (root / "report" / "report.md").read_text()
    for heading in ("Task pool", "Probe", "GRPO", "Evaluation"):
        assert f"## {heading}" in report
    assert "| valid_rate |" in report and "| base | trained |" in report
    assert (root / "report" / "solve_counts.png").exists() and (root / "report" / "grpo_curves.png").exists()


def test_rerun_skips_finished_stages(toy_config, capsys):
    cfg = toy_config
    cfg.stages = ["label", "probe"]
    first = run_pipeline(cfg)
    second = run_pipeline(cfg)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert capsys.readouterr().err.count("done earlier, skipped") == 2


def test_bad_pipeline_config_names_the_key(tmp_path):
    from propel.errors import ConfigError

    with pytest.raises(ConfigError, match="grpo.max_stepz"):
        load_pipeline_config(None, ["grpo.max_stepz=3"])
    with pytest.raises(ConfigError, match="label.band"):
        load_pipeline_config(None, ["label.band=[1,9]"])
    with pytest.raises(ConfigError, match="stages"):
        load_pipeline_config(None, ["stages=[label,nope]"])
    with pytest.raises(ConfigError, match="probe.split"):
        load_pipeline_config(None, ["probe.split=loo"])


def test_engine_auto_picks_vllm_only_when_installed():
    import importlib.util

    from propel.errors import ConfigError

    cfg = load_pipeline_config(None, [])
    assert cfg.engine == "auto"
    assert cfg.engine_kind == ("vllm" if importlib.util.find_spec("vllm") else "hf")
    assert load_pipeline_config(None, ["engine=hf"]).engine_kind == "hf"
    with pytest.raises(ConfigError, match="'engine'"):
        load_pipeline_config(None, ["engine=trt"])
