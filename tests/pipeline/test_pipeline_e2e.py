"""End to end: ``propel pipeline`` at toy scale (tiny model) writes every stage's files and the report.

The tiny random model writes no valid task, so the pool is seeded with hand-written labeled tasks (both classes,
for the probe) under 24 of the 28 context ids the label stage uses: the label stage resumes as after a killed run
and generates, checks and writes the 4 missing tasks for real; every later stage runs for real on the tiny model.
"""

from __future__ import annotations

import copy
import gc
import json
import re
import shutil
import weakref

import pandas as pd
import pytest

from propel.domains import MathExpressionDomain
from propel.pipeline.run import run_pipeline
from propel.pipeline.stage_configs import load_pipeline_config
from propel.records import Task
from propel.testing.plain_configs import read_config_files

PROBLEMS = [
    ("Tom has {a} apples and buys {b} more. How many apples does he have?", "{a} + {b}"),
    ("A box holds {a} pens. How many pens are in {b} boxes?", "{a} * {b}"),
]


SEEDED, N_TASKS = 24, 28
"""Context ids seeded with labeled tasks; the label stage generates the rest of its ``N_TASKS``."""


def _seed_pool(pool_dir, domain: MathExpressionDomain, n_tasks: int, seed: int) -> None:
    rows = []
    for i, ctx in enumerate(domain.contexts(n_tasks, seed)[:SEEDED]):
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
    return _toy_config(tmp_path, tiny_model_dir, monkeypatch)


def _toy_config(tmp_path, tiny_model_dir, monkeypatch, *extra: str):
    monkeypatch.setenv("WANDB_MODE", "offline")
    workdir = tmp_path / "run"
    overrides = [
        f"workdir={workdir}",
        f"model={tiny_model_dir}",
        f"label.data.init_args.n_tasks={N_TASKS}",
        "label.model.init_args.solver.n_trials=4",
        "label.model.init_args.solver.band=[1,2]",
        "label.model.init_args.solver.max_new_tokens=8",
        "sampling.max_new_tokens=8",  # labeling, RVP, GRPO and evaluation: one token budget
        "probe.layers=[1,2]",
        "probe.poolings=[last_token,mean_full]",
        "probe.sweep.archs=[linear]",
        "probe.sweep.balances=[weighted]",
        "probe.sweep.seeds=[0]",
        "probe.rvp.contexts=2",
        "probe.rvp.group_size=2",
        "grpo.trainer.max_steps=2",
        "grpo.data.init_args.contexts_per_step=1",
        "grpo.model.init_args.group_size=2",
        "grpo.callbacks.ModelCheckpoint.every_n_train_steps=1",
        "grpo.callbacks.AdapterSaver.every_n_steps=1",
        "evaluate.data.init_args.n_tasks=4",
        "evaluate.data.init_args.batch_size=4",
        "evaluate.model.init_args.solver.n_trials=2",
        *extra,
    ]
    cfg = load_pipeline_config(None, overrides)
    domain = MathExpressionDomain(**cfg.domain.get("init_args", {}))
    _seed_pool(workdir / "label" / "pool", domain, N_TASKS, cfg.seed)
    return cfg


def _record_stage_objects(monkeypatch) -> list[tuple[str, weakref.ref]]:
    """Weak references to every Lightning run's trainer and model, as the runs are built."""
    from propel.cli import lightning_cli

    alive: list[tuple[str, weakref.ref]] = []
    build = lightning_cli.PropelCLI.__init__

    def recording(self, *args, **kwargs):
        build(self, *args, **kwargs)
        alive.extend((f"{type(o).__name__} of {self.subcommand}", weakref.ref(o)) for o in (self.trainer, self.model))

    monkeypatch.setattr(lightning_cli.PropelCLI, "__init__", recording)
    return alive


@pytest.fixture(scope="module")
def finished_toy_run(tmp_path_factory, tiny_model_dir):
    """The toy pipeline, run once for the tests that read a finished run (its config, what each stage returned, and
    weak references to the Lightning objects each stage built). A test that adds to the run's folder (the ablations'
    arms) adds beside the stages the others read; none changes them."""
    with pytest.MonkeyPatch.context() as mp:
        cfg = _toy_config(tmp_path_factory.mktemp("toy"), tiny_model_dir, mp)
        alive = _record_stage_objects(mp)
        summaries = run_pipeline(cfg)
    return cfg, summaries, alive


def test_pipeline_runs_every_stage_and_writes_the_report(finished_toy_run):
    cfg, summaries, alive = finished_toy_run
    root = cfg.root
    assert set(summaries) == {"label", "probe", "grpo", "evaluate"}
    for stage in ("label", "probe", "grpo", "evaluate"):
        assert (root / stage / "summary.json").exists()
    # label: the seeded rows were kept and the missing contexts were generated and checked by the stage itself
    from propel.pools.io import read_pool

    pool = read_pool(root / "label" / "pool")
    assert summaries["label"]["tasks"] == N_TASKS == len(pool) == pool["id"].nunique()
    seeded = pd.read_parquet(root / "label" / "pool" / "part-0-r0-seed.parquet")["id"]
    generated = pool[~pool["id"].isin(seeded)]
    assert len(generated) == N_TASKS - SEEDED and summaries["label"]["positives"] >= SEEDED // 2
    assert all(reason for reason in generated["reason"]) and not generated["valid"].any()  # the tiny model's junk
    # probe: cache, sweep table, heatmap, reliability diagram, loadable artifact
    from propel.probes import ProbeArtifact
    from propel.probes.rivals import load_ranker

    artifact = ProbeArtifact.load(root / "probe" / "probe_artifact")  # the probe always; artifact/: the winner
    reward = load_ranker(root / "probe" / "artifact")
    assert isinstance(reward, ProbeArtifact) == (summaries["probe"]["reward"] == "probe")
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
        assert result["intervals"]["valid_rate"] is not None  # every rate with its Wilson interval
        assert json.loads((root / "evaluate" / name / "settings.json").read_text())["adapter"] == (
            None if name == "base" else summaries["grpo"]["adapter"]
        )
    lift = summaries["evaluate"]["lift"]  # trained - base with Newcombe's interval, in words
    assert {"valid_rate", "utility"} <= set(lift) and "distinguishable from zero" in lift["valid_rate"]["words"]
    assert "change [95% interval]" in (root / "evaluate" / "compare.md").read_text()
    # no stage outlives its run: the stages run one after another in one process, and each stage's trainer and model
    # are gone when it ends (a parser left in a context variable by jsonargparse, and W&B's service holding a copy of
    # that context, kept the demo's warm-start model resident through the labeling stage: 4.5 GB peak against 3.7 GB)
    gc.collect()
    assert len(alive) >= 6  # label, grpo, evaluate's policies: a trainer and a model each
    assert [name for name, ref in alive if ref() is not None] == []
    report = (root / "report" / "report.md").read_text()
    assert lift["valid_rate"]["words"] in report
    for heading in ("Task pool", "Probe", "GRPO", "Evaluation"):
        assert f"## {heading}" in report
    assert report.count("**Verdict:** ") == 4 and "95% interval" in report
    # the values kept in step, each link with the value it set (one token budget for every stage that samples)
    assert "## Values kept in step across stages" in report and "[links.md](links.md)" in report
    links = (root / "report" / "links.md").read_text()
    for target in (
        "label.model.init_args.max_new_tokens",
        "probe.rvp.max_new_tokens",
        "grpo.model.init_args.max_new_tokens",
        "evaluate.model.init_args.max_new_tokens",
    ):
        assert f"| `run.max_new_tokens` | `{target}` | `8` |" in links
    assert "sweep/sweep_heatmap.png" not in report  # alt texts describe the image, not a path
    held = summaries["probe"]["held_out"]  # the probe vs chance and its baselines, with paired intervals
    assert set(held) == {"rows", "probe", "logistic", "length_only", "topic_only"}
    assert "The exported probe on its refit split's test rows" in report and "| topic_only |" in report
    assert "chance (held-out balanced accuracy" in report  # the verdict reads the intervals
    ranking = summaries["probe"]["held_out_ranking"]  # how it ranks the same rows: what GRPO uses of it
    assert 0.0 <= ranking["auroc"] <= 1.0 and -1.0 <= ranking["spearman_solve_count"] <= 1.0
    low, high = ranking["auroc_interval"]  # a class-stratified bootstrap interval: is the ranking above chance?
    assert low <= ranking["auroc"] <= high
    assert f"AUROC {ranking['auroc']:.3f} [{low:.3f}, {high:.3f}] against the in-band label" in report
    assert "| valid_rate |" in report and "| base | trained |" in report
    assert (root / "report" / "solve_counts.png").exists() and (root / "report" / "grpo_curves.png").exists()
    # the signal cost of the trained policy: labeling's trials offline (n_trials per valid task), none online
    cost = summaries["grpo"]["signal_cost"]
    assert cost["solver_trials_offline"] == 4 * summaries["label"]["valid"] and cost["solver_trials_online"] == 0
    assert cost["signal_seconds_per_task"] > 0
    assert f"| trained | {cost['signal_seconds_per_task']:.3g} | 0 | {cost['solver_trials_offline']} |" in report


def test_rerun_skips_finished_stages(toy_config, capsys):
    cfg = toy_config
    cfg.stages = ["label", "probe"]
    first = run_pipeline(cfg)
    ran = capsys.readouterr().err
    peaks = [float(x) for x in re.findall(r"stage \w+ finished in \d+s, peak memory so far ([\d.]+) GB", ran)]
    assert len(peaks) == 2 and 0.05 < peaks[0] <= peaks[1] < 24  # the process's own high-water mark, in GB
    second = run_pipeline(cfg)
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
    assert capsys.readouterr().err.count("done earlier, skipped") == 2


def test_resume_refuses_a_stage_started_with_other_settings(toy_config, capsys):
    """A stage cut short resumes only with the settings it was started with: a changed key is named, not mixed in."""
    from propel.errors import ConfigError
    from propel.pipeline.stages import stage_config, write_config

    cfg = toy_config
    path, config = stage_config(cfg, "probe")
    config = json.loads(json.dumps(config))
    config["sweep"]["seeds"] = [0, 1]
    write_config(config, path)  # as if a run with other seeds was killed mid-stage
    cfg.stages = ["label", "probe"]
    with pytest.raises(ConfigError, match=r"sweep.seeds: \[0, 1\] -> \[0\]"):
        run_pipeline(cfg)
    assert (cfg.root / "label" / "summary.json").exists() and not (cfg.root / "probe" / "summary.json").exists()


def test_bad_pipeline_config_names_the_key(tmp_path):
    from propel.errors import ConfigError

    with pytest.raises(ConfigError, match="grpo.*max_stepz"):
        load_pipeline_config(None, ["grpo.trainer.max_stepz=3"])
    with pytest.raises(ConfigError, match="label.model.init_args.solver.*band"):
        load_pipeline_config(None, ["label.model.init_args.solver.band=[1,9]"])
    with pytest.raises(ConfigError, match="evaluate.model.init_args.solver.*band"):
        load_pipeline_config(None, ["evaluate.model.init_args.solver.n_trials=2"])  # label's band is 1..3
    with pytest.raises(ConfigError, match="stages"):
        load_pipeline_config(None, ["stages=[label,nope]"])
    with pytest.raises(ConfigError, match="probe.*split"):
        load_pipeline_config(None, ["probe.sweep.split=loo"])
    with pytest.raises(ConfigError, match="grpo.callbacks.EarlyStopping"):
        load_pipeline_config(None, ["grpo.callbacks.EarlyStopping.patience=3"])
    with pytest.raises(ConfigError, match="does not exist"):
        load_pipeline_config(None, [f"label.config=[{tmp_path / 'nope.yaml'}]"])


def test_stage_configs_are_the_templates_with_the_run_level_values_kept_in_step(tmp_path):
    """One set of defaults: what a stage runs is its template (as `propel <cmd> -c template` would run it) plus the
    section's keys; the pipeline only sets the values that must agree across stages."""
    from propel.cli.lightning_cli import resolve_lightning

    cfg = load_pipeline_config(
        "configs/demo.yaml",
        [
            f"workdir={tmp_path}",
            "seed=3",
            "grpo.model.init_args.rewards=[{class_path: propel.rewards.probe_reward.ProbeReward, "
            "init_args: {gate: {mode: soft_gate, floor: -2.0, soft_clip: [0.1, 0.9]}}}]",
            "grpo.model.init_args.group_size=6",
        ],
    )
    label, probe, grpo, evaluate = (cfg.configs[k] for k in ("label", "probe", "grpo", "evaluate"))
    # the label template's values, untouched where the pipeline has nothing to keep in step
    by_hand = resolve_lightning("predict", read_config_files(["configs/math/label.yaml"]))
    assert label["model"]["init_args"]["solver"] == by_hand["model"]["init_args"]["solver"]
    assert label["data"]["init_args"]["n_tasks"] == 96 and by_hand["data"]["init_args"]["n_tasks"] == 64
    # run-level values: one seed, one domain, one model, paths under workdir
    assert label["seed_everything"] == grpo["seed_everything"] == probe["seed"] == 3
    assert evaluate["data"]["init_args"]["seed"] == 4
    assert grpo["data"]["init_args"]["domain"] == label["model"]["init_args"]["domain"]
    assert probe["pool"] == label["data"]["init_args"]["pool_dir"] == str(tmp_path / "label" / "pool")
    assert grpo["model"]["init_args"]["rewards"][0]["init_args"]["artifact"] == str(tmp_path / "probe" / "artifact")
    # RVP is scored with the reward GRPO trains with (the gate object, the group size); evaluation grades as
    # labeling did
    gate = probe["rvp"]["gate"]
    assert gate["mode"] == "soft_gate" and gate["floor"] == -2.0 and list(gate["soft_clip"]) == [0.1, 0.9]
    assert probe["rvp"]["group_size"] == grpo["model"]["init_args"]["group_size"] == 6
    assert probe["rvp"]["max_new_tokens"] == label["model"]["init_args"]["max_new_tokens"]
    assert evaluate["model"]["init_args"]["solver"] == label["model"]["init_args"]["solver"]
    trained = cfg.evaluate_config("trained", "x/adapter")
    assert trained["model"]["init_args"]["adapter"] == "x/adapter"
    assert trained["data"]["init_args"]["pool_dir"] == trained["model"]["init_args"]["output_dir"]


def test_engine_auto_picks_vllm_only_when_installed():
    import importlib.util

    from propel.errors import ConfigError

    cfg = load_pipeline_config(None, [])
    assert cfg.engine == "auto" and cfg.configs["grpo"]["model"]["init_args"]["engine"] == cfg.engine_kind
    assert cfg.engine_kind == ("vllm" if importlib.util.find_spec("vllm") else "hf")
    assert load_pipeline_config(None, ["engine=hf"]).engine_kind == "hf"
    with pytest.raises(ConfigError, match="'engine'"):
        load_pipeline_config(None, ["engine=trt"])


@pytest.mark.parametrize(
    ("override", "expected"),
    [
        ("grpo.model.init_args.group_size=1", r"'grpo.model.init_args.group_size': must be >= 2"),
        ("grpo.model.init_args.ppo_epochs=0", r"'grpo.model.init_args.ppo_epochs': must be >= 1"),
    ],
)
def test_values_a_later_stage_refuses_fail_before_stage_one(tmp_path, override, expected):
    """Every stage's model and datamodule are built when the config is read: a GRPO value its class refuses used
    to surface only at the GRPO stage, after labeling and the probe sweep had run."""
    from propel.errors import ConfigError

    with pytest.raises(ConfigError, match=expected) as err:
        load_pipeline_config(None, [f"workdir={tmp_path / 'run'}", override])
    assert "\n" not in str(err.value)
    assert not (tmp_path / "run").exists()


def test_a_setting_added_by_an_upgrade_at_its_default_still_resumes(toy_config):
    """A GRPO stage folder written before propel gained a setting (the key absent from its config) resumes when the
    setting is at its class default, and refuses when it is not."""
    from propel.pipeline.stages import changed_settings, stage_config, write_config

    cfg = toy_config
    path, config = stage_config(cfg, "grpo")
    old = copy.deepcopy(config)
    for key in ("async_rollouts", "max_staleness"):  # as written before these keys existed
        del old["model"]["init_args"][key]
    write_config(old, path)
    assert changed_settings(cfg, "grpo") == []
    cfg.configs["grpo"]["model"]["init_args"]["max_staleness"] = 2
    assert changed_settings(cfg, "grpo") == ["model.init_args.max_staleness: None -> 2"]


def test_a_label_folder_from_before_the_budget_took_one_spelling_still_resumes(toy_config):
    """A label stage folder whose config spells the budget ``generator_max_new_tokens`` (propel before 2026-12-07)
    shows no change at the same values, and shows the change under today's name when the value moved."""
    from propel.pipeline.stages import changed_settings, stage_config, write_config

    cfg = toy_config
    path, config = stage_config(cfg, "label")
    old = copy.deepcopy(config)
    args = old["model"]["init_args"]
    for name in ("max_new_tokens", "temperature"):
        args[f"generator_{name}"] = args.pop(name)
    write_config(old, path)
    assert changed_settings(cfg, "label") == []
    budget = config["model"]["init_args"]["max_new_tokens"]
    cfg.configs["label"]["model"]["init_args"]["max_new_tokens"] = budget + 1
    assert changed_settings(cfg, "label") == [f"model.init_args.max_new_tokens: {budget} -> {budget + 1}"]


def test_propel_vs_its_ablations_trains_and_evaluates_each_arm_on_a_finished_run(finished_toy_run, monkeypatch, capsys):
    """``experiments/propel_vs_sil/run.py`` on the toy run: the SIL arm and the validity-gate-alone arm each train one
    step
    from the run's GRPO config with only the reward swapped, are evaluated like the trained policy, and land in the
    table next to base and PROPEL; a rerun reuses them."""
    import importlib.util
    from pathlib import Path

    import yaml

    spec = importlib.util.spec_from_file_location(
        "propel_vs_sil", Path(__file__).resolve().parents[2] / "experiments" / "propel_vs_sil" / "run.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setenv("WANDB_MODE", "offline")
    root = finished_toy_run[0].root
    assert bench.max_time(3725.2) == "00:01:02:06" and bench.max_time(90000) == "01:01:00:00"
    rows = bench.main(["--workdir", str(root), "--max-steps", "1", "--sil-equal-time"])
    assert set(rows) == {"base", "PROPEL", "SIL", "validity gate alone"}
    from propel.pipeline.stages import csv_metrics

    propel_seconds = bench.step_seconds(csv_metrics(root / "grpo"))  # summed step times: the same across resumes
    assert propel_seconds > 0
    assert bench.step_seconds({"train/time/generation_s": [1.0, float("nan")], "train/time/training_s": [2.5]}) == 3.5
    for arm, reward in (("sil", bench.SIL), ("gate", bench.GATE)):
        config = yaml.safe_load((root / arm / "grpo" / "config.yaml").read_text())
        assert [r["class_path"] for r in config["model"]["init_args"]["rewards"]] == [reward]
        # SIL at PROPEL's step time (whichever of time and steps ends first); the gate arm by steps only
        expected = bench.max_time(propel_seconds) if arm == "sil" else None
        assert config["trainer"].get("max_time") == expected
        callbacks = [c["class_path"].rsplit(".", 1)[-1] for c in config["trainer"]["callbacks"]]
        assert not set(callbacks) & set(bench.NEEDS_PROBE) and config["trainer"]["max_steps"] == 1
        assert json.loads((root / arm / "grpo" / "summary.json").read_text())["steps"] == 1
        assert (root / arm / "evaluate" / "summary.json").exists()
    assert "validity gate alone" in capsys.readouterr().out
    page = (root / "ablations.md").read_text()
    assert "| Distinct-3 | change vs base | Self-BLEU-3 |" in page and "- SIL: validity" in page
    assert "Command: `python experiments/propel_vs_sil/run.py --workdir" in page
    assert f"SIL's training time budget: {propel_seconds:.0f} s" in page and "| RL step time s |" in page
    assert "| PROPEL minus | valid | utility | Distinct-3 | Self-BLEU-3 | utility among valid |" in page
    assert "- PROPEL vs validity gate alone: validity" in page
    stamp = (root / "gate" / "evaluate" / "summary.json").stat().st_mtime
    assert bench.main(["--workdir", str(root), "--arms", "gate", "--max-steps", "1"]) == {
        k: rows[k] for k in ("base", "PROPEL", "validity gate alone")
    }
    assert (root / "gate" / "evaluate" / "summary.json").stat().st_mtime == stamp  # finished arms are not rerun
    other = str(round(propel_seconds) + 3600)  # a budget unlike the one SIL trained with, however fast the machine
    with pytest.raises(SystemExit, match="delete it to train the sil arm again"):  # another budget: refused
        bench.main(["--workdir", str(root), "--arms", "sil", "--max-steps", "1", "--sil-seconds", other])

    # --sil-alone: PROPEL's GRPO stage reruns unchanged and alone, and SIL gets its training time
    shutil.rmtree(root / "sil")
    bench.main(["--workdir", str(root), "--arms", "sil", "--max-steps", "1", "--sil-alone"])
    alone = json.loads((root / bench.ALONE / "grpo" / "summary.json").read_text())
    propel_rewards = csv_metrics(root / "grpo")["train/reward/mean"]
    assert alone["steps"] == len(propel_rewards) and alone["train_seconds"] >= alone["step_seconds"] > 0
    assert alone["same_rewards"] == alone["steps"]  # the same run: seeded, nothing else on its rewards' path
    config = yaml.safe_load((root / "sil" / "grpo" / "config.yaml").read_text())
    assert config["trainer"]["max_time"] == bench.max_time(alone["train_seconds"])
    assert f"matched PROPEL's at {alone['steps']} of {alone['steps']} steps" in (root / "ablations.md").read_text()


def test_probe_outer_folds_pool_every_labeled_row_once(tmp_path, tiny_model_dir, monkeypatch, capsys):
    """``experiments/probe_outer_folds/run.py`` on a 3-fold toy probe stage: each outer fold reruns the probe job with
    its
    own test fold (sharing the activation cache), every labeled valid row is predicted exactly once, the pooled
    comparison equals ``compare_on_held_out`` on the folds' rows, and a rerun reuses the folds."""
    import importlib.util
    from pathlib import Path

    import yaml

    from propel.metrics.held_out import compare_on_held_out

    cfg = _toy_config(
        tmp_path, tiny_model_dir, monkeypatch, "probe.sweep.split=stratified_kfold", "probe.sweep.n_folds=3",
        "stages=[label,probe]",
    )  # fmt: skip
    run_pipeline(cfg)
    spec = importlib.util.spec_from_file_location(
        "probe_outer_folds", Path(__file__).resolve().parents[2] / "experiments" / "probe_outer_folds" / "run.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    held = bench.main(["--workdir", str(cfg.root)])

    folds = [cfg.root / "probe_folds" / f"fold{k}" for k in range(3)]
    assert all((f / "cache").is_symlink() for f in folds)
    for k, folder in enumerate(folds):
        assert yaml.safe_load((folder / "config.yaml").read_text())["sweep"]["test_fold"] == k
    parts = [json.loads((f / "held_out_rows.json").read_text()) for f in folds]
    ids = [i for p in parts for i in p["ids"]]
    probe_summary = json.loads((cfg.root / "probe" / "summary.json").read_text())
    assert len(ids) == len(set(ids)) == probe_summary["rows"]  # every valid labeled row, once
    assert held["rows"]["positives"] == probe_summary["positives"]
    labels = [y for p in parts for y in p["labels"]]
    predictions = {n: [v for p in parts for v in p[n]] for n in ("probe", "logistic", "length_only")}
    expected = compare_on_held_out(labels, predictions, subject="probe", seed=0)
    assert held["probe"]["vs_logistic"] == pytest.approx(expected["probe"]["vs_logistic"])
    report = (cfg.root / "probe_folds" / "report.md").read_text()
    assert "**Verdict:** the probe" in report and "| outer fold | selected |" in report
    stamp = (folds[1] / "summary.json").stat().st_mtime
    capsys.readouterr()
    assert bench.main(["--workdir", str(cfg.root)]) == held  # folds reused, the same bootstrap
    assert "[folds] outer fold" not in capsys.readouterr().out and (folds[1] / "summary.json").stat().st_mtime == stamp
