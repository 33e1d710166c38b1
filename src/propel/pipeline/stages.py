"""The pipeline's stages. Each writes its outputs under ``workdir/<stage>/`` and a ``summary.json`` when done;
a stage whose summary exists is skipped, and a stage cut short resumes from what it wrote.

Stages that are Lightning jobs (label, grpo, evaluate) write a standalone ``config.yaml`` and run it through
``propel.cli``: the same file reruns that stage alone (``propel predict -c workdir/label/config.yaml``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import yaml

from propel.pipeline.config import PipelineConfig


def write_json(path: Path, data: dict) -> None:
    """Atomic JSON write (a crash never leaves half a summary that would mark a stage done)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)


def read_summary(cfg: PipelineConfig, stage: str) -> dict | None:
    path = cfg.root / stage / "summary.json"
    return json.loads(path.read_text()) if path.exists() else None


def run_cli(subcommand: str, config: dict, path: Path, extra_args: list[str] | None = None) -> None:
    """Write a LightningCLI config to ``path`` and run ``propel <subcommand> -c path`` in this process."""
    import warnings

    from propel.cli import PropelCLI

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    with warnings.catch_warnings():  # the pipeline's own argv is not this stage's: that is intended here
        warnings.filterwarnings("ignore", message="LightningCLI's args parameter is intended")
        PropelCLI(args=[subcommand, "-c", str(path), *(extra_args or [])])


def label_config(cfg: PipelineConfig) -> dict:
    """LightningCLI predict config of the labeling stage."""
    spec = cfg.label
    return {
        "seed_everything": cfg.seed,
        "trainer": {
            "accelerator": "auto",
            "devices": 1,
            "logger": False,
            "default_root_dir": str(cfg.root / "label"),
            "callbacks": [
                {
                    "class_path": "propel.callbacks.pool_writer.PoolWriter",
                    "init_args": {"output_dir": str(cfg.root / "label" / "pool")},
                }
            ],
        },
        "model": {
            "class_path": "propel.lit_modules.labeling.LabelingModule",
            "init_args": {
                "domain": cfg.domain,
                "generator": cfg.model,
                "solver": cfg.solver,
                "engine": cfg.engine_kind,
                "engine_kwargs": dict(cfg.engine_kwargs),
                "n_trials": spec.n_trials,
                "band": list(spec.band),
                "generator_max_new_tokens": spec.generator_max_new_tokens,
                "generator_temperature": spec.generator_temperature,
                "solver_max_new_tokens": spec.solver_max_new_tokens,
                "solver_temperature": spec.solver_temperature,
                "seed": cfg.seed,
            },
        },
        "data": {
            "class_path": "propel.datamodules.task_pool.TaskPoolDataModule",
            "init_args": {"n_tasks": spec.n_tasks, "batch_size": spec.batch_size, "seed": cfg.seed},
        },
        "return_predictions": False,
    }


def run_label(cfg: PipelineConfig) -> dict:
    """Collect + label ``label.n_tasks`` tasks into ``workdir/label/pool`` (resumes: labeled ids are skipped)."""
    from propel.callbacks.pool_writer import pool_summary
    from propel.datamodules.task_pool import read_pool

    out = cfg.root / "label"
    start = time.monotonic()
    run_cli("predict", label_config(cfg), out / "config.yaml")
    frame = read_pool(out / "pool")
    summary = pool_summary(frame, cfg.label.n_trials)
    summary.update(seconds=time.monotonic() - start, pool=str(out / "pool"))
    write_json(out / "summary.json", summary)
    return summary


def _pool_texts(cfg: PipelineConfig, domain):
    """Ids and rendered task texts of the pool's valid tasks (what the frozen reference reads)."""
    from propel.datamodules.task_pool import read_pool
    from propel.domains.base import Task

    frame = read_pool(cfg.root / "label" / "pool")
    valid = frame[frame["valid"].astype(bool)]
    return frame, [str(i) for i in valid["id"]], [domain.render(Task.from_json(t)) for t in valid["task"]]


def rvp_sample_texts(cfg: PipelineConfig, domain, model, tokenizer) -> tuple[list[str], list[bool]]:
    """A fixed base-policy sample (``rvp_contexts`` x ``rvp_group_size``), as rendered texts + validity.

    Invalid generations keep their raw completion as text; the hard gate ignores their probe score anyway.
    """
    import torch

    from propel.domains.base import Task
    from propel.engines.base import SamplingSpec
    from propel.engines.hf import HFEngine
    from propel.sandbox.local import LocalSandbox

    spec = cfg.probe
    torch.manual_seed(cfg.seed + 1)
    contexts = domain.contexts(spec.rvp_contexts, seed=cfg.seed + 10_000)  # disjoint from the labeled pool's
    sampling = SamplingSpec(
        n=spec.rvp_group_size,
        max_new_tokens=cfg.label.generator_max_new_tokens,
        temperature=cfg.label.generator_temperature,
        stop=list(domain.generator_stop),
    )
    outs = HFEngine(model, tokenizer).generate([c.prompt for c in contexts], sampling)
    completions = [o.text for group in outs for o in group]
    parsed = [domain.parse(text) for text in completions]
    tasks = [p for p in parsed if isinstance(p, Task)]
    with LocalSandbox(max_workers=2) as sandbox:
        verdicts = iter(domain.validity(tasks, sandbox) if tasks else [])
    texts, valid = [], []
    for text, p in zip(completions, parsed, strict=True):
        ok = isinstance(p, Task) and next(verdicts).ok
        texts.append(domain.render(p) if isinstance(p, Task) else text)
        valid.append(ok)
    return texts, valid


def run_probe(cfg: PipelineConfig) -> dict:
    """Pool -> frozen-reference features (cached, resumable) -> sweep -> selected probe artifact + plots."""
    import torch

    from propel.models import freeze, load_model
    from propel.pipeline.objects import instantiate
    from propel.probes import ActivationExtractor, extract_to_cache
    from propel.probes.data import align_labels
    from propel.probes.plots import plot_reliability
    from propel.probes.sweep import (
        BASELINE_ARCH,
        RVPSample,
        SweepConfig,
        parse_key,
        refit_selected,
        run_sweep,
        split_indices,
    )

    spec, out = cfg.probe, cfg.root / "probe"
    start = time.monotonic()
    domain = instantiate(cfg.domain, "domain")
    frame, ids, texts = _pool_texts(cfg, domain)
    if not texts:
        raise RuntimeError("probe stage: the pool has no valid task; label more tasks or change the domain")
    model, tokenizer = load_model(cfg.model)
    freeze(model)
    extractor = ActivationExtractor(
        model, tokenizer, spec.layers, spec.poolings, batch_size=spec.batch_size, max_length=spec.max_length
    )
    cache = extract_to_cache(extractor, texts, model_id=cfg.model, cache_root=out / "cache", ids=ids)
    features = {key: cache.load(key) for key in cache.keys}
    rows = align_labels(cache.ids, frame)

    rvp_sample = None
    if spec.rvp_contexts > 0:
        rvp_texts, rvp_valid = rvp_sample_texts(cfg, domain, model, tokenizer)
        rvp_sample = RVPSample(
            features=extractor.encode(rvp_texts),
            valid=torch.tensor(rvp_valid),
            group_size=spec.rvp_group_size,
            invalid_penalty=cfg.grpo.invalid_penalty,
        )
    sweep_cfg = SweepConfig(
        archs=spec.archs,
        balances=spec.balances,
        seeds=spec.seeds,
        max_ece=spec.max_ece,
        split=spec.split,
        n_folds=spec.n_folds,
    )
    result = run_sweep(features, rows, sweep_cfg, rvp_sample=rvp_sample, out_dir=out / "sweep")
    module, metrics = refit_selected(features, rows, result, sweep_cfg)
    layer, pooling = parse_key(result.selected["key"])
    artifact = module.to_artifact(
        reference_model=cfg.model, layer=layer, pooling=pooling, max_length=spec.max_length, metrics=metrics
    )
    artifact.save(out / "artifact")

    _, _, test = split_indices(rows, sweep_cfg, fold=metrics["fold"])  # rows the refit probe never trained on
    test_idx = torch.as_tensor(rows.rows[test], dtype=torch.long)
    with torch.no_grad():
        probs = artifact.probs(features[result.selected["key"]][test_idx].float())
    plot_reliability(
        probs,
        rows.labels[torch.as_tensor(test, dtype=torch.long)],
        out / "reliability.png",
        title=f"selected probe {result.selected['key']} {result.selected['arch']} (test split)",
    )

    table = result.table
    baseline = table[(table["arch"] == BASELINE_ARCH) & (table["key"] == result.selected["key"])]
    selected = {k: (v.item() if hasattr(v, "item") else v) for k, v in result.selected.to_dict().items()}
    summary = {
        "rows": len(rows.ids),
        "positives": int(rows.labels.sum().item()),
        "selected": selected,
        "selected_refit_metrics": metrics,
        "logistic_baseline": baseline.iloc[0].to_dict() if len(baseline) else None,
        "top_cells": table.head(5).to_dict("records"),
        "artifact": str(out / "artifact"),
        "seconds": time.monotonic() - start,
    }
    write_json(out / "summary.json", summary)
    return summary


def grpo_config(cfg: PipelineConfig) -> dict:
    """LightningCLI fit config of the GRPO stage (probe reward from the probe stage's artifact)."""
    spec, out = cfg.grpo, cfg.root / "grpo"
    return {
        "seed_everything": cfg.seed,
        "trainer": {
            "accelerator": "auto",
            "devices": 1,
            "precision": "32-true",
            "default_root_dir": str(out),
            "max_steps": spec.max_steps,
            "log_every_n_steps": 1,
            "logger": [
                {
                    "class_path": "propel.loggers.PropelWandbLogger",
                    "init_args": {"project": "propel", "name": "pipeline-grpo", "save_dir": str(out)},
                },
                {
                    "class_path": "lightning.pytorch.loggers.CSVLogger",
                    "init_args": {"save_dir": str(out), "name": "csv"},
                },
            ],
            "callbacks": [
                {
                    "class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                    "init_args": {
                        "dirpath": str(out / "checkpoints"),
                        "every_n_train_steps": spec.checkpoint_every,
                        "save_last": True,
                        "save_top_k": -1,
                    },
                },
                {
                    "class_path": "propel.callbacks.adapters.AdapterSaver",
                    "init_args": {"dirpath": str(out / "adapters"), "every_n_steps": spec.checkpoint_every},
                },
                {"class_path": "propel.callbacks.collapse.CollapseDetector", "init_args": {"every_n_steps": 5}},
                {"class_path": "propel.callbacks.samples.SampleTable", "init_args": {"every_n_steps": 5}},
            ],
        },
        "model": {
            "class_path": "propel.lit_modules.grpo.GRPOModule",
            "init_args": {
                "model": cfg.model,
                "rewards": [
                    {
                        "class_path": "propel.rewards.probe.ProbeReward",
                        "init_args": {
                            "artifact": str(cfg.root / "probe" / "artifact"),
                            "mode": spec.reward_mode,
                            "invalid_penalty": spec.invalid_penalty,
                            "text": "task",
                        },
                    }
                ],
                "group_size": spec.group_size,
                "max_new_tokens": spec.max_new_tokens,
                "temperature": spec.temperature,
                "lr": spec.lr,
                "loss": {"loss_type": spec.loss_type, "beta": spec.beta},
                "engine": cfg.engine_kind,
                "engine_kwargs": dict(cfg.engine_kwargs),
                **spec.extra,
            },
        },
        "data": {
            "class_path": "propel.datamodules.rollouts.RolloutDataModule",
            "init_args": {"domain": cfg.domain, "contexts_per_step": spec.contexts_per_step, "seed": cfg.seed},
        },
    }


def _csv_metrics(out: Path) -> dict[str, list[float]]:
    """Per-step training metrics from the CSV logger (all versions, in order; a resumed run appends a version)."""
    import pandas as pd

    files = sorted((out / "csv").glob("version_*/metrics.csv"), key=lambda p: int(p.parent.name.split("_")[1]))
    if not files:
        return {}
    frame = pd.concat([pd.read_csv(f) for f in files], ignore_index=True)
    frame = frame.groupby("step", sort=True).last()
    return {c: frame[c].tolist() for c in frame.columns}


def run_grpo(cfg: PipelineConfig) -> dict:
    """GRPO on the LoRA policy; resumes from ``checkpoints/last.ckpt`` when a run was cut short."""
    out = cfg.root / "grpo"
    start = time.monotonic()
    last = out / "checkpoints" / "last.ckpt"
    run_cli("fit", grpo_config(cfg), out / "config.yaml", ["--ckpt_path", str(last)] if last.exists() else None)
    metrics = _csv_metrics(out)
    reward = metrics.get("train/reward/mean", [])
    valid = metrics.get("train/valid_rate", [])
    kl = metrics.get("train/kl", [])
    adapters = sorted((out / "adapters").glob("step-*"), key=lambda p: int(p.name.split("-")[1]))
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
        "adapter": str(adapters[-1]) if adapters else None,
        "curves": {"reward": reward, "valid_rate": valid, "kl": kl},
    }
    write_json(out / "summary.json", summary)
    return summary


def eval_config(cfg: PipelineConfig, name: str, adapter: str | None) -> dict:
    """LightningCLI test config for evaluating the base (``adapter=None``) or trained policy."""
    spec = cfg.evaluate
    return {
        "seed_everything": cfg.seed,
        "trainer": {
            "accelerator": "auto",
            "devices": 1,
            "logger": False,
            "default_root_dir": str(cfg.root / "evaluate" / name),
        },
        "model": {
            "class_path": "propel.lit_modules.evaluation.EvaluationModule",
            "init_args": {
                "domain": cfg.domain,
                "generator": cfg.model,
                "adapter": adapter,
                "solver": cfg.solver,
                "output_dir": str(cfg.root / "evaluate" / name),
                "engine": cfg.engine_kind,
                "engine_kwargs": dict(cfg.engine_kwargs),
                "n_trials": spec.n_trials,
                "band": list(cfg.label.band),
                "generator_max_new_tokens": cfg.label.generator_max_new_tokens,
                "generator_temperature": cfg.label.generator_temperature,
                "solver_max_new_tokens": cfg.label.solver_max_new_tokens,
                "solver_temperature": cfg.label.solver_temperature,  # graded as the probe's labels were
                "seed": cfg.seed,
            },
        },
        "data": {
            "class_path": "propel.lit_modules.evaluation.EvaluationData",
            "init_args": {"n_tasks": spec.n_tasks, "seed": cfg.seed + 1, "batch_size": spec.batch_size},
        },
    }


def run_evaluate(cfg: PipelineConfig) -> dict:
    """Fresh tasks from the base and the trained policy, real solver trials, side by side."""
    from propel.lit_modules.evaluation import SUMMARY, compare_dirs

    out = cfg.root / "evaluate"
    start = time.monotonic()
    grpo = read_summary(cfg, "grpo") or {}
    policies = {"base": None}
    if grpo.get("adapter"):
        policies["trained"] = grpo["adapter"]
    results = {}
    for name, adapter in policies.items():
        folder = out / name
        if not (folder / SUMMARY).exists():
            run_cli("test", eval_config(cfg, name, adapter), folder / "config.yaml")
        results[name] = json.loads((folder / SUMMARY).read_text())
    if "trained" in results:
        compare_dirs(out / "base", out / "trained", out)
    summary = {**results, "seconds": time.monotonic() - start}
    write_json(out / "summary.json", summary)
    return summary
