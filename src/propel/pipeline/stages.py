"""The pipeline's stages. Each writes its outputs under ``workdir/<stage>/`` and a ``summary.json`` when done;
a stage whose summary exists is skipped, and a stage cut short resumes from what it wrote.

Every stage writes its composed config (``propel.pipeline.stage_configs``) to ``workdir/<stage>/config.yaml`` and
runs it as a user would: ``propel predict|fit|test -c`` for the Lightning stages, ``propel probe -c`` for the
probe, so the same file reruns that stage alone.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from propel.callbacks.collapse import ALARMS
from propel.durable import write_json
from propel.pipeline.config import GATE_ARM, STAGE_SUBCOMMAND, WARM_START, PipelineConfig
from propel.pipeline.links import LOGGERS
from propel.pipeline.outputs import HANDED_ON, hand_on, with_outputs
from propel.renamed import with_todays_names


def read_summary(cfg: PipelineConfig, stage: str) -> dict | None:
    path = cfg.root / stage / "summary.json"
    return json.loads(path.read_text()) if path.exists() else None


def stage_config(cfg: PipelineConfig, stage: str) -> tuple[Path, dict]:
    """Where a stage writes its config, and the config it runs now: the composed one with the outputs of the stages
    before it that it takes (``propel.pipeline.outputs.HANDED_ON``); evaluate: its base-policy run."""
    path = stage_config_path(cfg, stage)
    if stage == "evaluate":
        return path, cfg.evaluate_config("base", None)
    return path, with_outputs(cfg, stage)


def changed_settings(cfg: PipelineConfig, stage: str) -> list[str]:
    """``key: old -> new`` for every setting that differs from the config the stage was started with earlier."""
    if not stage_config_path(cfg, stage).exists():
        return []
    path, config = stage_config(cfg, stage)
    from propel.cli.lightning_cli import flat_keys

    old, new = with_todays_names(flat_keys(yaml.safe_load(path.read_text()) or {})), flat_keys(config)
    keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k) and not _added_default(k, old, new))
    return [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys]


def _added_default(key: str, old: dict, new: dict) -> bool:
    """Whether ``key`` is a setting a newer propel added (absent from the old config) left at its default: the stage
    behaves as it did, so a run folder made before the upgrade still resumes."""
    from propel.cli.static_keys import init_default

    if key in old or key not in new or ".init_args." not in f".{key}":
        return False
    owner, _, arg = f".{key}".rpartition(".init_args.")
    class_path = new.get(f"{owner}.class_path".lstrip("."))
    return isinstance(class_path, str) and "." not in arg and init_default(class_path, arg) == new[key]


def stage_config_path(cfg: PipelineConfig, stage: str) -> Path:
    """Where a stage writes its config (``stage_config``'s path, without composing the config)."""
    return cfg.root / ("evaluate/base" if stage == "evaluate" else stage) / "config.yaml"


def write_config(config: dict, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def run_label(cfg: PipelineConfig) -> dict:
    """Collect + label tasks into ``workdir/label/pool`` (resumes: labeled ids are skipped); ``adapter`` in the
    summary names the policy whose tasks were labeled (None: the base generator)."""
    from propel.cli.lightning_cli import run_lightning
    from propel.pools.io import read_pool
    from propel.pools.summary import pool_summary

    out = cfg.root / "label"
    start = time.monotonic()
    config = with_outputs(cfg, "label")
    run_lightning(STAGE_SUBCOMMAND["label"], write_config(config, out / "config.yaml"))
    frame = read_pool(out / "pool")
    summary = pool_summary(frame, cfg.solver["n_trials"])
    adapter = config["model"]["init_args"].get("adapter")
    summary.update(seconds=time.monotonic() - start, pool=str(out / "pool"), adapter=adapter)
    write_json(out / "summary.json", summary)
    return summary


def run_probe(cfg: PipelineConfig) -> dict:
    """``propel probe`` on the labeled pool: features, sweep, selection, artifact (writes its own summary)."""
    from propel.jobs.probe_job import main as probe_main

    path = write_config(with_outputs(cfg, "probe"), cfg.root / "probe" / "config.yaml")
    return probe_main(["-c", str(path)])


def csv_trainer_overlay(root: Path, steps: int) -> dict:
    """The ``trainer`` section of a child ``propel fit`` run whose per-step metrics ``csv_metrics(root)`` reads:
    ``steps`` steps under ``root``, a CSV logger only, no progress bar (the parent prints its own)."""
    return {
        "default_root_dir": str(root),
        "max_steps": steps,
        "logger": [{"class_path": LOGGERS[1], "init_args": {"save_dir": str(root), "name": "csv"}}],
        "enable_progress_bar": False,
    }


def csv_metrics(out: Path) -> dict[str, list[float]]:
    """Per-step training metrics from the CSV logger (all versions, in order; a resumed run appends a version)."""
    import pandas as pd

    files = sorted((out / "csv").glob("version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[1]))
    if not files:
        return {}
    frame = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    frame = frame.groupby("step", sort=True).last()
    return {"step": frame.index.tolist(), **{c: frame[c].tolist() for c in frame.columns}}


COLLAPSE_CURVES = {
    "top_topic": "collapse/top_topic",
    "self_bleu": "collapse/self_bleu",
    "degenerate": "monitor/degenerate",
    "copies": "monitor/copies",
    "top_template": "monitor/top_template",
    "distinct_templates": "monitor/distinct_templates",
    "answer_log10_median": "monitor/answer_log10_median",
}
"""The per-step collapse and degeneration metrics (``CollapseDetector``) a GRPO summary keeps as ``[step, value]``
points (each ``monitor/degenerate_<reason>`` share too, under ``degenerate_<reason>``)."""


def _points(frame: dict[str, list], key: str) -> list[list[float]]:
    """``[step, value]`` of every step that logged ``key`` (a callback logs every N steps: the rest are NaN)."""
    values = frame.get(key, [])
    return [[int(s), float(v)] for s, v in zip(frame.get("step", []), values, strict=False) if v == v]


def _collapse_points(metrics: dict[str, list]) -> dict[str, list[list[float]]]:
    """``COLLAPSE_CURVES`` and every per-reason degenerate share as ``[step, value]`` points."""
    keys = dict(COLLAPSE_CURVES)
    keys.update({k.removeprefix("monitor/"): k for k in metrics if k.startswith("monitor/degenerate_")})
    return {name: _points(metrics, key) for name, key in keys.items()}


def latest_adapter(folder: Path) -> str | None:
    """The highest-step ``step-<n>`` adapter folder ``AdapterSaver`` wrote into ``folder``, or None."""
    adapters = sorted(folder.glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
    return str(adapters[-1]) if adapters else None


def continues_warm_start(cfg: PipelineConfig, name: str) -> bool:
    """Whether stage ``name`` continues the warm start's run: it takes the warm start's checkpoint (``HANDED_ON``:
    the GRPO stage and the gate arm) and the run has one before it."""
    return cfg.runs_before(WARM_START, name) and any(
        row.source == f"{WARM_START}:checkpoint" and row.stage == name for row in HANDED_ON
    )


def start_checkpoint(cfg: PipelineConfig, name: str) -> Path | None:
    """Where a GRPO run starts: its own ``last.ckpt`` when it was cut short; else the checkpoint it takes from a stage
    before it (the warm start's, for the GRPO stage and the gate arm of a run with one: ``HANDED_ON``); else None
    (from the base model)."""
    last = cfg.root / name / "checkpoints" / "last.ckpt"
    if last.exists():
        return last
    handed = hand_on(cfg, name).get("ckpt_path")
    return Path(handed) if handed else None


def stage_alarms(cfg: PipelineConfig, name: str) -> list[str]:
    """The monitors' alarms a GRPO stage raised itself: a stage that continues the warm start restores its
    detector's state, alarms included, so the warm start's own alarms are left out (its section reports them)."""

    def read(stage: str) -> list[str]:
        path = cfg.root / stage / ALARMS
        return json.loads(path.read_text()) if path.exists() else []

    inherited = set(read(WARM_START)) if continues_warm_start(cfg, name) else set()
    return [alarm for alarm in read(name) if alarm not in inherited]


def run_warm_start(cfg: PipelineConfig) -> dict:
    """GRPO against the validity gate alone into ``workdir/warm_start``; the GRPO stage continues it."""
    return run_grpo(cfg, WARM_START)


def run_grpo(cfg: PipelineConfig, name: str = "grpo") -> dict:
    """GRPO on the LoRA policy into ``workdir/name`` (the warm start and the co-evolution runs reuse it); resumes
    from ``checkpoints/last.ckpt`` when a run was cut short, and the GRPO stage of a run with a warm start from the
    warm start's (``start_checkpoint``)."""
    from propel.cli.lightning_cli import run_lightning
    from propel.pipeline.signal_cost import labeling_trials, signal_cost

    out = cfg.root / name
    start = time.monotonic()
    resume = start_checkpoint(cfg, name)
    config = write_config(cfg.configs[name], out / "config.yaml")
    run_lightning(STAGE_SUBCOMMAND[name], config, ["--ckpt_path", str(resume)] if resume else None)
    metrics = csv_metrics(out)
    reward = metrics.get("train/reward/mean", [])
    valid = metrics.get("train/valid_rate", [])
    kl = metrics.get("train/kl", [])
    summary = {
        "steps": len(reward),
        "reward_start": reward[0] if reward else None,
        "reward_end": reward[-1] if reward else None,
        "reward_first5_mean": sum(reward[:5]) / len(reward[:5]) if reward else None,
        "reward_last5_mean": sum(reward[-5:]) / len(reward[-5:]) if reward else None,
        "valid_rate_start": valid[0] if valid else None,
        "valid_rate_end": valid[-1] if valid else None,
        "kl_end": kl[-1] if kl else None,
        "step_time_s": (time.monotonic() - start) / max(len(reward), 1),
        "seconds": time.monotonic() - start,
        "adapter": latest_adapter(out / "adapters"),
        "curves": {"reward": reward, "valid_rate": valid, "kl": kl},
        "collapse": _collapse_points(metrics),
        "alarms": stage_alarms(cfg, name),
        "signal_cost": signal_cost(
            metrics,
            0
            if name in (WARM_START, GATE_ARM)
            else labeling_trials(read_summary(cfg, "label"), cfg.solver["n_trials"]),
        ),
    }
    mined = out / "mined" / "summary.json"
    if mined.exists():
        summary["mining"] = json.loads(mined.read_text())
    write_json(out / "summary.json", summary)
    return summary


def run_evaluate(cfg: PipelineConfig) -> dict:
    """Fresh tasks from the base and the trained policy (and the warm start and the gate-continued arm, when the run
    had them), real solver trials, side by side; ``lift`` holds each change trained - base with its interval
    (``propel.pipeline.compare.lift``), ``lift_vs_warm_start`` trained - warm start, ``lift_vs_gate_arm`` trained -
    gate arm: what the GRPO stage's own reward added beyond as many more steps of the gate."""
    from propel.cli.lightning_cli import run_lightning
    from propel.pipeline.compare import SUMMARY, compare_dirs

    out = cfg.root / "evaluate"
    start = time.monotonic()
    grpo = read_summary(cfg, "grpo") or {}
    gate = read_summary(cfg, GATE_ARM) or {}
    policies: dict[str, str | None] = {"base": None}
    for name in (WARM_START, GATE_ARM, "trained"):  # the policies the stages before hand on (HANDED_ON)
        adapter = hand_on(cfg, "evaluate", run=name).get("model.init_args.adapter")
        if adapter:
            policies[name] = adapter
    results = {}
    for name, adapter in policies.items():
        folder = out / name
        if not (folder / SUMMARY).exists():
            config = write_config(cfg.evaluate_config(name, adapter), folder / "config.yaml")
            run_lightning(STAGE_SUBCOMMAND["evaluate"], config)
        results[name] = json.loads((folder / SUMMARY).read_text())
    summary = dict(results)
    if "trained" in results:
        compare_dirs(out / "base", out / "trained", out, costs={"trained": grpo.get("signal_cost")})
        summary["lift"] = json.loads((out / "lift.json").read_text())  # trained - base with intervals, in words
    if "trained" in results and WARM_START in results:
        folder = out / "vs_warm_start"
        compare_dirs(out / WARM_START, out / "trained", folder, names=(WARM_START, "trained"))
        summary["lift_vs_warm_start"] = json.loads((folder / "lift.json").read_text())
    if "trained" in results and GATE_ARM in results:  # the comparison that says what the reward added
        folder = out / "vs_gate_arm"
        costs = {"trained": grpo.get("signal_cost"), GATE_ARM: gate.get("signal_cost")}
        compare_dirs(out / GATE_ARM, out / "trained", folder, costs=costs, names=(GATE_ARM, "trained"))
        summary["lift_vs_gate_arm"] = json.loads((folder / "lift.json").read_text())
    summary["seconds"] = time.monotonic() - start
    write_json(out / "summary.json", summary)
    return summary
