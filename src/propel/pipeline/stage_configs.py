"""Compose the stage configs from their templates, the pipeline section's keys and the run-level values.

Order: a stage's templates, then its section's keys, then what the pipeline keeps the same across stages (see
``propel.pipeline.config``). Each Lightning stage is then completed with every default exactly as
``propel <subcommand> --print_config`` would print it, which also validates it, and its model and datamodule are
built once (without weights), so a wrong key or a value a class refuses fails here, before any stage runs, naming
the stage and the key.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from propel.cli.errors import explain, init_error
from propel.errors import ConfigError
from propel.pipeline import compose
from propel.pipeline.config import (
    COEVOLUTION_STAGES,
    STAGE_SUBCOMMAND,
    TEMPLATES,
    PipelineConfig,
    read_pipeline_config,
    template_path,
)

PROBE_REWARD = "ProbeReward"
LOGGERS = ("propel.loggers.PropelWandbLogger", "lightning.pytorch.loggers.CSVLogger")


def _template(cfg: PipelineConfig, stage: str, inherit: str | None = None) -> DictConfig:
    """The stage's templates with its section's keys (and ``callbacks`` init_args) set. ``inherit`` names a stage
    whose section applies first (templates, keys, callbacks; a callback its templates lack is skipped): the
    constrained GRPO run starts from the GRPO stage's settings, the auxiliary probe from the probe stage's."""
    own = dict(getattr(cfg, stage))
    base = dict(getattr(cfg, inherit)) if inherit else {}
    paths = own.pop("config", None) or base.pop("config", None) or TEMPLATES[inherit or stage]
    base.pop("config", None)
    paths = [paths] if isinstance(paths, str) else list(paths)
    node = compose.load([template_path(p) for p in paths], f"{stage}.config")
    for section, name, strict in ((base, inherit, False), (own, stage, True)):
        callbacks = section.pop("callbacks", None) or {}
        compose.set_keys(node, section, name)
        for cls, values in callbacks.items():
            if not compose.set_init_args(node, "trainer.callbacks", cls, **dict(values or {})) and strict:
                raise ConfigError(f"pipeline config key '{name}.callbacks.{cls}': the {name} templates have no {cls}")
    return node


def _put(node: DictConfig, key: str, value: Any) -> None:
    """Set ``key`` to ``value`` (a mapping replaces what is there: a domain's init_args never mix)."""
    OmegaConf.update(node, key, value, merge=False, force_add=True)


def _callback(node: DictConfig, stage: str, name: str, required: bool, **values: Any) -> None:
    if not compose.set_init_args(node, "trainer.callbacks", name, **values) and required:
        raise ConfigError(f"pipeline config key '{stage}.config': the {stage} stage needs a {name} callback")


def _stage_error(stage: str, text: str) -> str:
    """``key: reason`` of a stage's config as the pipeline config key (``grpo.model.init_args.lr: ...``)."""
    key, sep, reason = text.partition(": ")
    if sep and re.fullmatch(r"[\w.\[\]-]+", key):
        return f"pipeline config key '{stage}.{key}': " + reason.replace("Did you mean: '", f"Did you mean: '{stage}.")
    return f"pipeline config key '{stage}': {text}"


def _lightning(stage: str, node: DictConfig) -> dict:
    """The complete config ``propel <subcommand>`` runs (every default filled in); errors name the stage."""
    from jsonargparse import ArgumentError

    from propel.cli.lightning_cli import resolve_lightning

    try:
        config = resolve_lightning(STAGE_SUBCOMMAND[stage], compose.resolved(node, stage))
    except (ArgumentError, ConfigError, SystemExit) as err:
        raise ConfigError(_stage_error(stage, explain(str(err)))) from None
    _build(stage, config)
    return config


def _build(stage: str, config: dict) -> None:
    """Build the stage's model and datamodule once (no weights load: that happens in ``configure_model`` or at
    the stage's start) so a value their ``__init__`` refuses (``grpo.model.init_args.group_size: 1``) fails now,
    naming the stage and the key, not after the earlier stages have run."""
    from jsonargparse import ArgumentError, ArgumentParser
    from lightning.pytorch import LightningDataModule, LightningModule

    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(LightningModule, "model", fail_untyped=False)
    parser.add_subclass_arguments(LightningDataModule, "data", fail_untyped=False)
    try:
        # a copy: parse_object turns nested mappings (a dataclass value such as a reward's gate) into Namespaces
        parsed = parser.parse_object(copy.deepcopy({"model": config["model"], "data": config["data"]}))
        parser.instantiate_classes(parsed)
    except (ArgumentError, ConfigError, ValueError, TypeError) as err:
        raise ConfigError(_stage_error(stage, init_error(str(err)))) from None


def _probe(node: DictConfig) -> dict:
    """The probe job's config, validated by building the job (nothing runs)."""
    from propel.jobs.probe_job import parse_probe

    plain = compose.resolved(node, "probe")
    try:
        import yaml

        parse_probe(["-c", yaml.safe_dump(plain, sort_keys=False)])
    except ConfigError as err:
        raise ConfigError(_stage_error("probe", str(err))) from None
    return plain


def _probe_reward(grpo: dict) -> dict | None:
    rewards = grpo["model"]["init_args"].get("rewards") or []
    hits = [r for r in rewards if str(r.get("class_path", "")).rsplit(".", 1)[-1] == PROBE_REWARD]
    return hits[0].get("init_args", {}) if hits else None


def _check_static_keys(nodes: dict[str, DictConfig]) -> None:
    """A misspelled key in a Lightning stage's section fails here, from the classes' source, in well under a second
    (``propel.cli.static_keys``), before Lightning is imported to validate the rest."""
    from propel.cli.static_keys import check_keys

    for stage, node in nodes.items():
        try:
            check_keys(OmegaConf.to_container(node, resolve=False))
        except ConfigError as err:
            raise ConfigError(_stage_error(stage, str(err))) from None


def compose_stages(cfg: PipelineConfig) -> dict[str, dict]:
    """Every stage's complete config; sets ``cfg.model``, ``cfg.domain`` and ``cfg.seed`` to the values used."""
    nodes = {stage: _template(cfg, stage) for stage in ("label", "grpo", "evaluate")}  # each composed once
    if any(stage in cfg.stages for stage in COEVOLUTION_STAGES):  # GRPO runs on the grpo section's settings
        nodes.update({s: _template(cfg, s, inherit="grpo") for s in ("constrained", "auxiliary") if s in cfg.stages})
    _check_static_keys(nodes)
    from propel.domains.trials import SolverSpec

    root, engine, engine_kwargs = cfg.root, cfg.engine_kind, dict(cfg.engine_kwargs)
    label = nodes["label"]
    cfg.model = cfg.model or OmegaConf.select(label, "model.init_args.generator") or "smollm2-135m-instruct"
    domain = cfg.domain or OmegaConf.select(label, "model.init_args.domain")
    if domain is None:
        raise ConfigError("pipeline config key 'domain': neither the pipeline nor the label template sets one")
    cfg.domain = domain = OmegaConf.to_container(domain, resolve=True) if isinstance(domain, DictConfig) else domain
    seed = cfg.seed if cfg.seed is not None else OmegaConf.select(label, "seed_everything")
    cfg.seed = seed = int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else 0

    pool = str(root / "label" / "pool")
    for key, value in {
        "seed_everything": seed,
        "trainer.default_root_dir": str(root / "label"),
        "model.init_args.generator": cfg.model,
        "model.init_args.domain": domain,
        "model.init_args.seed": seed,
        "model.init_args.engine": engine,
        "model.init_args.engine_kwargs": engine_kwargs,
        "data.init_args.domain": domain,
        "data.init_args.seed": seed,
        "data.init_args.pool_dir": pool,
    }.items():
        _put(label, key, value)
    _callback(label, "label", "PoolWriter", True, output_dir=pool)
    configs = {"label": _lightning("label", label)}
    generator = configs["label"]["model"]["init_args"]
    try:
        SolverSpec(**generator["solver"])
    except ConfigError as err:
        raise ConfigError(f"pipeline config key 'label.model.init_args.solver': {err}") from None

    artifact = str(root / "probe" / "artifact")
    configs["grpo"] = _grpo(cfg, nodes["grpo"], "grpo", artifact, None, "probe" in cfg.stages)

    configs["probe"] = _probe_stage(cfg, _template(cfg, "probe"), pool, root / "probe", configs)

    evaluate = nodes["evaluate"]
    n_trials = OmegaConf.select(evaluate, "model.init_args.solver.n_trials")
    solver = {**generator["solver"], **({"n_trials": n_trials} if n_trials is not None else {})}
    try:
        SolverSpec(**solver)
    except ConfigError as err:
        raise ConfigError(f"pipeline config key 'evaluate.model.init_args.solver' (the label stage's): {err}") from None
    for key, value in {
        "seed_everything": seed,
        "trainer.logger": False,
        "model.init_args.generator": cfg.model,
        "model.init_args.domain": domain,
        "model.init_args.seed": seed,
        "model.init_args.engine": engine,
        "model.init_args.engine_kwargs": engine_kwargs,
        "model.init_args.solver": solver,
        "model.init_args.oracle": generator.get("oracle"),
        "model.init_args.generator_max_new_tokens": generator["generator_max_new_tokens"],
        "model.init_args.generator_temperature": generator["generator_temperature"],
        "model.init_args.top_p": generator["top_p"],
        "model.init_args.output_dir": str(root / "evaluate" / "base"),
        "data.init_args.domain": domain,
        "data.init_args.seed": seed + 1,
    }.items():
        _put(evaluate, key, value)
    configs["evaluate"] = _lightning("evaluate", evaluate)
    if any(stage in cfg.stages for stage in COEVOLUTION_STAGES):
        configs.update(_coevolution(cfg, configs, nodes))
    return configs


def _grpo(cfg: PipelineConfig, node: DictConfig, name: str, artifact: str, constraint: str | None, need: bool) -> dict:
    """A GRPO run's config: paths under ``workdir/name``, the run-level values, the ProbeReward's artifact (and
    constraint probe) set; ``need``: the templates must hold a ProbeReward."""
    out = cfg.root / name
    for key, value in {
        "seed_everything": cfg.seed,
        "trainer.default_root_dir": str(out),
        "trainer.logger": [
            {
                "class_path": LOGGERS[0],
                "init_args": {"project": "propel", "name": f"pipeline-{name}", "save_dir": str(out)},
            },
            {"class_path": LOGGERS[1], "init_args": {"save_dir": str(out), "name": "csv"}},
        ],
        "model.init_args.model": cfg.model,
        "model.init_args.engine": cfg.engine_kind,
        "model.init_args.engine_kwargs": dict(cfg.engine_kwargs),
        "data.init_args.domain": cfg.domain,
        "data.init_args.seed": cfg.seed,
    }.items():
        _put(node, key, value)
    evaluated = "evaluate" in cfg.stages or "arms" in cfg.stages
    _callback(node, name, "ModelCheckpoint", True, dirpath=str(out / "checkpoints"))
    _callback(node, name, "AdapterSaver", evaluated, dirpath=str(out / "adapters"))
    _callback(node, name, "AdversarialProbeMining", False, output_dir=str(out / "mined"))
    probe = {"artifact": artifact, **({"constraint": constraint} if constraint else {})}
    if not compose.set_init_args(node, "model.init_args.rewards", PROBE_REWARD, **probe) and need:
        raise ConfigError(f"pipeline config key '{name}.config': the GRPO templates have no ProbeReward to train with")
    return _lightning(name, node)


def _probe_stage(cfg: PipelineConfig, node: DictConfig, pool: str, out, configs: dict) -> dict:
    """A probe job's config: ``pool`` in, ``out`` out, the reference, domain and RVP reward kept in step (the GRPO
    ``ProbeReward``'s gate object and GRPO's group size are copied whole, so RVP scores with the trained reward)."""
    generator = configs["label"]["model"]["init_args"]
    reward = _probe_reward(configs["grpo"]) or {}
    grpo = configs["grpo"]["model"]["init_args"]
    for key, value in {
        "pool": pool,
        "output_dir": str(out),
        "domain": cfg.domain,
        "reference_model": cfg.model,
        "seed": cfg.seed,
        "engine": cfg.engine_kind,
        "engine_kwargs": dict(cfg.engine_kwargs),
        "rvp.max_new_tokens": generator["generator_max_new_tokens"],
        "rvp.temperature": generator["generator_temperature"],
        **({"rvp.gate": reward["gate"]} if reward.get("gate") else {}),
        **({"rvp.group_size": grpo["group_size"]} if "group_size" in grpo else {}),
    }.items():
        _put(node, key, value)
    return _probe(node)


def _coevolution(cfg: PipelineConfig, configs: dict, nodes: dict[str, DictConfig]) -> dict:
    """The co-evolution stages' configs (``propel.pipeline.coevolution``): the auxiliary pool's rule, the auxiliary
    probe (the probe stage's sweep on that pool), the constrained and auxiliary-only GRPO runs (the GRPO stage's
    settings, another reward; their templates composed and key-checked with the others, ``nodes``) and the arms to
    evaluate."""
    from propel.pipeline.coevolution import ArmsSpec, AuxPoolSpec, spec_dict

    root = cfg.root
    main, aux = str(root / "probe" / "artifact"), str(root / "aux_probe" / "artifact")
    out = {"aux_pool": spec_dict(AuxPoolSpec, cfg.aux_pool, "aux_pool")}
    out["aux_probe"] = _probe_stage(
        cfg, _template(cfg, "aux_probe", inherit="probe"), str(root / "aux_pool" / "pool"), root / "aux_probe", configs
    )
    constrained = nodes.get("constrained") or _template(cfg, "constrained", inherit="grpo")
    out["constrained"] = _grpo(cfg, constrained, "constrained", main, aux, True)
    if "auxiliary" in cfg.stages:
        out["auxiliary"] = _grpo(cfg, nodes["auxiliary"], "auxiliary", aux, None, True)
    arms = spec_dict(ArmsSpec, cfg.arms, "arms")
    out["arms"] = {**arms, "evaluate": copy.deepcopy(configs["evaluate"])}
    return out


def load_pipeline_config(path: str | Path | None = None, overrides: list[str] | None = None) -> PipelineConfig:
    """Read the pipeline YAML and compose and validate every stage's config (``cfg.configs``)."""
    cfg = read_pipeline_config(path, overrides)
    cfg.configs = compose_stages(cfg)
    return cfg
