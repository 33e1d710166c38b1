"""Adversarial probe co-evolution as one ``propel pipeline`` run at toy scale (tiny model), and its config.

As in ``test_pipeline_e2e``, the tiny random model writes no valid task: the label pool is seeded with hand-written
labeled tasks, and the GRPO stage's mined pool with hand-written mined rows (what ``AdversarialProbeMining`` writes
when the policy's top-scored valid tasks get real solver trials). Every stage then runs for real on the tiny model.
"""

from __future__ import annotations

import json

import pytest

from propel.domains import MathExpressionDomain
from propel.errors import ConfigError
from propel.pipeline.run import run_pipeline
from propel.pipeline.stage_configs import load_pipeline_config
from propel.pools import MINED_SCHEMA, read_pool, write_part
from propel.records import Task
from tests.pipeline.test_pipeline_e2e import _seed_pool

STAGES = "[label,probe,grpo,evaluate,aux_pool,aux_probe,constrained,auxiliary,arms]"
MINED = [  # (problem, expression, solve count of 4): band 1..2, so 0 and 4 are out of band
    ("A train travels {a} miles per hour for 3 hours. How far does it go?", "{a} * 3", 0),
    ("A bus travels {a} miles per hour for 2 hours. How far does it go?", "{a} * 2", 4),
    ("A car goes {a} miles per hour for 2 hours. How far does it go?", "{a} * 2", 1),
]


def _seed_mined(folder, domain: MathExpressionDomain, n: int) -> dict[str, set[str]]:
    """Mined rows: each ``MINED`` problem ``n`` times; returns the ids by kind."""
    rows, kinds = [], {"out_of_band": set(), "in_band": set()}
    for i in range(n):
        for j, (problem, expression, solved) in enumerate(MINED):
            completion = f" {problem.format(a=100 + i)}\nExpression: {expression.format(a=100 + i)}"
            task = domain.parse(completion)
            assert isinstance(task, Task) and domain.validity([task])[0].ok
            label = int(1 <= solved <= 2)
            row_id = f"mined-5-{i}-{j}"
            kinds["in_band" if label else "out_of_band"].add(row_id)
            rows.append(
                dict(
                    id=row_id,
                    group="mined",
                    domain=domain.name,
                    context="{}",
                    completion=completion,
                    task=task.to_json(),
                    valid=True,
                    reason="ok",
                    grades=[True] * solved + [False] * (4 - solved),
                    solve_count=solved,
                    label=label,
                    topic=domain.topic(task),
                    n_trials=4,
                    solver_tokens=0,
                    probe_logit=1.5,
                    step=5,
                )
            )
    write_part(folder, rows, MINED_SCHEMA)
    return kinds


def _overrides(workdir, model) -> list[str]:
    """The toy run: the tiny model, few tasks, two GRPO steps per run, mining in the GRPO templates."""
    return [
        f"workdir={workdir}",
        f"model={model}",
        f"stages={STAGES}",
        "label.data.init_args.n_tasks=24",
        "label.model.init_args.solver.n_trials=4",
        "label.model.init_args.solver.band=[1,2]",
        "label.model.init_args.solver.max_new_tokens=8",
        "label.model.init_args.max_new_tokens=8",
        "probe.layers=[1,2]",
        "probe.poolings=[last_token]",
        "probe.sweep.archs=[linear]",
        "probe.sweep.balances=[weighted]",
        "probe.sweep.seeds=[0]",
        "probe.rvp.contexts=2",
        "probe.rvp.group_size=2",
        "grpo.config=[configs/grpo/base.yaml,configs/math/grpo.yaml,configs/math/mining.yaml]",
        "grpo.trainer.max_steps=2",
        "grpo.data.init_args.contexts_per_step=2",
        "grpo.model.init_args.group_size=2",
        "grpo.model.init_args.max_new_tokens=8",
        "grpo.callbacks.ModelCheckpoint.every_n_train_steps=1",
        "grpo.callbacks.AdapterSaver.every_n_steps=1",
        "grpo.callbacks.CollapseDetector.every_n_steps=1",
        "grpo.callbacks.AdversarialProbeMining.solver={n_trials: 4, band: [1, 2], max_new_tokens: 8}",
        "evaluate.data.init_args.n_tasks=4",
        "evaluate.data.init_args.batch_size=4",
        "evaluate.model.init_args.solver.n_trials=2",
        "aux_probe.sweep.split=stratified_kfold",
        "aux_probe.sweep.n_folds=3",
    ]


@pytest.fixture()
def coevolution_config(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    workdir = tmp_path / "run"
    overrides = _overrides(workdir, tiny_model_dir)
    cfg = load_pipeline_config(None, overrides)
    domain = MathExpressionDomain(**cfg.domain.get("init_args", {}))
    _seed_pool(workdir / "label" / "pool", domain, 24, cfg.seed)
    cfg.mined_kinds = _seed_mined(workdir / "grpo" / "mined", domain, 4)
    return cfg


def test_coevolution_runs_every_stage_and_writes_the_four_arm_table(coevolution_config, capsys):
    cfg = coevolution_config
    summaries = run_pipeline(cfg)
    root = cfg.root
    assert list(summaries) == STAGES.strip("[]").split(",")
    # aux_pool: the mined out-of-band tasks + the collapsed topic's tasks as negatives, the 12 original positives
    pool = read_pool(root / "aux_pool" / "pool")
    info = summaries["aux_pool"]
    assert info["positives"] == 12 and info["false_positives"] == len(cfg.mined_kinds["out_of_band"]) == 8
    assert info["topic"] == "time_rate" and info["topic_share"] == pytest.approx(1.0)
    negatives = set(pool.loc[pool["label"] == 0, "id"])
    assert negatives == cfg.mined_kinds["out_of_band"] | {f"topic:{i}" for i in cfg.mined_kinds["in_band"]}
    assert not set(pool.loc[pool["label"] == 1, "task"]) & set(pool.loc[pool["label"] == 0, "task"])
    # aux_probe: the same sweep machinery, its own artifact
    from propel.probes import ProbeArtifact

    assert ProbeArtifact.load(root / "aux_probe" / "artifact").layer in (1, 2)
    # constrained: min(main, auxiliary); auxiliary: the auxiliary probe alone
    reward = lambda stage: cfg.configs[stage]["model"]["init_args"]["rewards"][0]["init_args"]  # noqa: E731
    assert reward("constrained")["constraint"] == str(root / "aux_probe" / "artifact")
    assert reward("constrained")["artifact"] == str(root / "probe" / "artifact")
    assert reward("auxiliary")["artifact"] == str(root / "aux_probe" / "artifact") and not reward("auxiliary").get(
        "constraint"
    )
    for stage in ("grpo", "constrained", "auxiliary"):
        assert summaries[stage]["steps"] == 2 and (root / stage / "adapters" / "step-2").is_dir()
        steps = [p[0] for p in summaries[stage]["collapse"]["self_bleu"]]
        assert len(steps) == 2 and steps[0] < steps[1]  # a collapse point per step (every_n_steps=1)
    # arms: four arms, base and single read back from the evaluate stage, the others evaluated here
    arms = summaries["arms"]["arms"]
    assert list(arms) == ["base", "single", "constrained", "auxiliary"]
    assert arms["base"]["folder"] == str(root / "evaluate" / "base")
    assert arms["single"]["folder"] == str(root / "evaluate" / "trained")
    assert arms["constrained"]["adapter"] == summaries["constrained"]["adapter"]
    for arm in arms.values():
        assert arm["summary"]["tasks"] == 4 and arm["summary"]["intervals"]["valid_rate"] is not None
    table = (root / "arms" / "arms.md").read_text()
    header = "| arm | tasks | utility | valid_rate | self_bleu_3 | distinct_3 | top_topic_rate | top topic |"
    assert header in table and all(f"| {arm} | 4 |" in table for arm in arms)
    assert set(summaries["arms"]["lift"]) == {
        "single - base",
        "constrained - base",
        "constrained - single",
        "auxiliary - base",
    }
    report = (root / "report" / "report.md").read_text()
    for heading in ("auxiliary pool", "auxiliary probe", "collapse per step, per arm", "arms (real solver trials)"):
        assert f"## Co-evolution: {heading}" in report
    assert "collapsed to topic **time_rate**" in report and header in report and "## Stage wall times" in report
    assert (root / "report" / "collapse.png").exists()
    # a rerun skips every finished stage
    capsys.readouterr()
    again = run_pipeline(cfg)
    assert capsys.readouterr().err.count("done earlier, skipped") == len(again)
    assert json.dumps(again["arms"], sort_keys=True) == json.dumps(summaries["arms"], sort_keys=True)


def test_coevolution_config_composes_every_stage(tmp_path):
    cfg = load_pipeline_config("configs/coevolution.yaml", [f"workdir={tmp_path}"])
    assert set(cfg.configs) >= {"aux_pool", "aux_probe", "constrained", "arms"} and "auxiliary" not in cfg.configs
    callbacks = lambda stage: [c["class_path"].rsplit(".", 1)[-1] for c in cfg.configs[stage]["trainer"]["callbacks"]]  # noqa: E731
    assert "AdversarialProbeMining" in callbacks("grpo") and "AdversarialProbeMining" not in callbacks("constrained")
    # the constrained run keeps the GRPO stage's keys; the auxiliary probe the probe stage's sweep
    assert cfg.configs["constrained"]["trainer"]["max_steps"] == cfg.configs["grpo"]["trainer"]["max_steps"] == 20
    assert cfg.configs["aux_probe"]["sweep"] == cfg.configs["probe"]["sweep"]
    assert cfg.configs["aux_probe"]["pool"] == str(tmp_path / "aux_pool" / "pool")
    assert cfg.configs["aux_pool"]["topic_from"] == ["mined", "evaluation"]
    with pytest.raises(ConfigError, match="aux_pool.min_topic_shar.*Did you mean: 'aux_pool.min_topic_share'"):
        load_pipeline_config("configs/coevolution.yaml", [f"workdir={tmp_path}", "aux_pool.min_topic_shar=0.2"])
    with pytest.raises(ConfigError, match="arms.arms"):
        load_pipeline_config("configs/coevolution.yaml", [f"workdir={tmp_path}", "arms.arms=[base,nope]"])
