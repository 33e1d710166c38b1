"""Compose the stage configs from their templates, the pipeline section's keys and the links.

Order: a stage's templates, then its section's keys, then the values the pipeline keeps in step across stages (the
links table, ``propel.pipeline.links``: a section key that disagrees with a link is refused). A misspelled key fails
first, from the classes' source (``propel.cli.static_keys``, well under a second). Each Lightning stage is then
checked once, by one pass of the command's own parser (which completes it with every default, as
``propel <subcommand> --print_config`` prints it) and by building its model and datamodule from that parse (without
weights); the probe stage by building its job. A wrong key or a value a class refuses fails here, before any stage
runs, naming the stage and the key.
"""

from __future__ import annotations

import copy
import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from propel.cli.errors import explain
from propel.errors import ConfigError
from propel.pipeline import compose, links
from propel.pipeline.config import (
    COEVOLUTION_STAGES,
    GATE_ARM,
    STAGE_SUBCOMMAND,
    TEMPLATES,
    WARM_START,
    PipelineConfig,
    read_pipeline_config,
    template_path,
)


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


def _stage_error(stage: str, text: str) -> str:
    """``key: reason`` of a stage's config as the pipeline config key (``grpo.model.init_args.lr: ...``)."""
    key, sep, reason = text.partition(": ")
    if sep and re.fullmatch(r"[\w.\[\]-]+", key):
        return f"pipeline config key '{stage}.{key}': " + reason.replace("Did you mean: '", f"Did you mean: '{stage}.")
    return f"pipeline config key '{stage}': {text}"


def _lightning(stage: str, node: DictConfig) -> dict:
    """The complete config ``propel <subcommand>`` runs (every default filled in), checked once: by the command's
    own parser and by building the stage's model and datamodule (no weights load), so a wrong key or a value a class
    refuses (``grpo.model.init_args.group_size: 1``) fails now, naming the stage and the key, not after the earlier
    stages have run."""
    from jsonargparse import ArgumentError

    from propel.cli.lightning_cli import build_lightning

    try:
        return build_lightning(STAGE_SUBCOMMAND[stage], compose.resolved(node, stage))
    except (ArgumentError, ConfigError, SystemExit) as err:
        raise ConfigError(_stage_error(stage, explain(str(err)))) from None


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


def _check_static_keys(nodes: dict[str, DictConfig]) -> None:
    """A misspelled key in a Lightning stage's section fails here, from the classes' source, in well under a second
    and with the closest accepted key (``propel.cli.static_keys``, as ``propel fit`` does before Lightning loads), not
    only once the earlier stages have been built."""
    from propel.cli.static_keys import check_keys

    for stage, node in nodes.items():
        try:
            check_keys(OmegaConf.to_container(node, resolve=False))
        except ConfigError as err:
            raise ConfigError(_stage_error(stage, str(err))) from None


def compose_stages(cfg: PipelineConfig) -> dict[str, dict]:
    """Every stage's complete config, in the order the links read them (label, GRPO, probe, evaluation, then the
    co-evolution's); sets ``cfg.model``, ``cfg.domain``, ``cfg.seed``, ``cfg.sampling`` to the values used and
    ``cfg.links`` to the links applied (``propel.pipeline.links``)."""
    nodes = {stage: _template(cfg, stage) for stage in ("label", "grpo", "evaluate")}
    if any(stage in cfg.stages for stage in COEVOLUTION_STAGES):  # their GRPO runs on the grpo section's settings
        nodes.update({s: _template(cfg, s, inherit="grpo") for s in ("constrained", "auxiliary") if s in cfg.stages})
    if WARM_START in cfg.stages:
        nodes[WARM_START] = _warm_start_template(cfg)
    if GATE_ARM in cfg.stages:
        nodes[GATE_ARM] = _gate_arm_template(cfg)
    _check_static_keys(nodes)
    run = _run_values(cfg, nodes["label"], nodes["grpo"])
    configs: dict[str, dict] = {}
    cfg.links = []
    label = _compose(cfg, "label", nodes["label"], run, configs)["model"]["init_args"]
    _solver("label", label["solver"])
    _compose(cfg, "grpo", nodes["grpo"], run, configs)
    if WARM_START in cfg.stages:
        _compose(cfg, WARM_START, nodes[WARM_START], run, configs, inherit="grpo")
        _check_warm_start_steps(configs[WARM_START], configs["grpo"])
    if GATE_ARM in cfg.stages:
        _compose(cfg, GATE_ARM, nodes[GATE_ARM], run, configs, inherit="grpo")
    _compose(cfg, "probe", _template(cfg, "probe"), run, configs)
    n_trials = OmegaConf.select(nodes["evaluate"], "model.init_args.solver.n_trials")
    _solver("evaluate", {**label["solver"], **({"n_trials": n_trials} if n_trials is not None else {})})
    _compose(cfg, "evaluate", nodes["evaluate"], run, configs)
    if any(stage in cfg.stages for stage in COEVOLUTION_STAGES):
        from propel.pipeline.coevolution import ArmsSpec, AuxPoolSpec, spec_dict

        configs["aux_pool"] = spec_dict(AuxPoolSpec, cfg.aux_pool, "aux_pool")
        _compose(cfg, "aux_probe", _template(cfg, "aux_probe", inherit="probe"), run, configs, inherit="probe")
        for name in ("constrained", "auxiliary"):
            if name == "constrained" or name in cfg.stages:
                node = nodes.get(name) or _template(cfg, name, inherit="grpo")
                _compose(cfg, name, node, run, configs, inherit="grpo")
        configs["arms"] = {**spec_dict(ArmsSpec, cfg.arms, "arms"), "evaluate": copy.deepcopy(configs["evaluate"])}
    return configs


GATE = [{"class_path": "propel.rewards.ValidityReward"}]
"""The warm start's reward unless its section sets one: 1 for a valid task, 0 otherwise."""


REWARDS = "model.init_args.rewards"


def _warm_start_template(cfg: PipelineConfig) -> DictConfig:
    """The warm start: the GRPO stage's templates and keys, then its own section's; its reward is the validity gate
    (``GATE``) unless the section sets ``model.init_args.rewards``."""
    given = links.given_keys(cfg.warm_start)
    if "trainer.max_steps" not in given:
        raise ConfigError(
            "pipeline config key 'warm_start.trainer.max_steps': the warm start's steps are its own; set them "
            "(e.g. 24, with grpo.trainer.max_steps 36 for 12 more against the probe)"
        )
    node = _template(cfg, WARM_START, inherit="grpo")
    if not any(k.startswith(REWARDS) for k in given):
        OmegaConf.update(node, REWARDS, copy.deepcopy(GATE), merge=False, force_add=True)
    elif cfg.runs_before(WARM_START, "probe") and links.entries(node, REWARDS, "ProbeReward"):
        raise ConfigError(
            "pipeline config key 'warm_start.model.init_args.rewards': a probe reward reads the probe stage's "
            f"artifact, and the warm start runs before the probe stage ({list(cfg.stages)})"
        )
    return node


def _gate_arm_template(cfg: PipelineConfig) -> DictConfig:
    """The gate-continued arm: the GRPO stage's templates and keys, then its own section's, with the validity gate
    (``GATE``) as its reward; its steps are the GRPO stage's (a link), so both arms end at the same step."""
    given = links.given_keys(cfg.gate_arm)
    if any(k.startswith(REWARDS) for k in given):
        raise ConfigError(
            f"pipeline config key '{GATE_ARM}.model.init_args.rewards': the gate arm's reward is the validity gate "
            "alone (it is the arm the trained generator is compared with); leave it out"
        )
    node = _template(cfg, GATE_ARM, inherit="grpo")
    OmegaConf.update(node, REWARDS, copy.deepcopy(GATE), merge=False, force_add=True)
    return node


def _check_warm_start_steps(warm: dict, grpo: dict) -> None:
    """The GRPO stage resumes the warm start's checkpoint, so its ``max_steps`` (Lightning's: the resumed run's
    global step to stop at) must lie beyond the warm start's."""
    w, g = warm["trainer"]["max_steps"], grpo["trainer"]["max_steps"]
    if w is None or w < 1:
        raise ConfigError(f"pipeline config key 'warm_start.trainer.max_steps': give the warm start's steps, got {w}")
    if g is None or g <= w:
        raise ConfigError(
            f"pipeline config key 'grpo.trainer.max_steps': {g} is not beyond the warm start's {w} steps; the GRPO "
            f"stage continues the warm start and counts from its start (e.g. {w + 12} for 12 steps after it)"
        )


def _compose(
    cfg: PipelineConfig, stage: str, node: DictConfig, run: dict, configs: dict, inherit: str | None = None
) -> dict:
    """One stage: its links applied to its composed ``node`` (a section key that disagrees with one is refused), then
    checked once by building it; adds its complete config to ``configs`` and the links to ``cfg.links``."""
    given = links.given_keys(getattr(cfg, inherit)) if inherit else {}
    given.update(links.given_keys(getattr(cfg, stage)))
    cfg.links += links.apply(stage, node, run, configs, given, cfg.stages)
    configs[stage] = _probe(node) if stage in ("probe", "aux_probe") else _lightning(stage, node)
    return configs[stage]


def _solver(stage: str, solver: dict) -> None:
    """The solver settings a stage runs with, checked whole (``SolverSpec``: the evaluation's ``n_trials`` against
    the label stage's band)."""
    from propel.domains.trials import SolverSpec

    try:
        SolverSpec(**solver)
    except ConfigError as err:
        own = "" if stage == "label" else " (the label stage's)"
        raise ConfigError(f"pipeline config key '{stage}.model.init_args.solver'{own}: {err}") from None


def _run_values(cfg: PipelineConfig, label: DictConfig, grpo: DictConfig) -> dict:
    """The run-level values the links read (``links.RUN_VALUES``), each from the pipeline config's top level or,
    where that is null, from the template it names (its class's default where the template sets none)."""
    from propel.cli.static_keys import init_default

    def template(node: DictConfig, key: str):
        value = OmegaConf.select(node, f"model.init_args.{key}")
        if value is None:
            value = init_default(str(OmegaConf.select(node, "model.class_path")), key)
        return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig) else value

    cfg.model = cfg.model or OmegaConf.select(label, "model.init_args.generator") or "smollm2-135m-instruct"
    domain = cfg.domain or OmegaConf.select(label, "model.init_args.domain")
    if domain is None:
        raise ConfigError("pipeline config key 'domain': neither the pipeline nor the label template sets one")
    cfg.domain = OmegaConf.to_container(domain, resolve=True) if isinstance(domain, DictConfig) else domain
    seed = cfg.seed if cfg.seed is not None else OmegaConf.select(label, "seed_everything")
    cfg.seed = int(seed) if isinstance(seed, int) and not isinstance(seed, bool) else 0
    s = cfg.sampling
    s.max_new_tokens = s.max_new_tokens if s.max_new_tokens is not None else template(label, "max_new_tokens")
    s.temperature = s.temperature if s.temperature is not None else template(label, "temperature")
    s.top_p = s.top_p if s.top_p is not None else template(label, "top_p")
    s.group_size = s.group_size if s.group_size is not None else template(grpo, "group_size")
    return {
        "model": cfg.model,
        "domain": cfg.domain,
        "seed": cfg.seed,
        "evaluation_seed": cfg.seed + 1,
        "engine": cfg.engine_kind,
        "engine_kwargs": dict(cfg.engine_kwargs),
        "max_new_tokens": s.max_new_tokens,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "group_size": s.group_size,
        "workdir": str(cfg.root),
    }


def load_pipeline_config(path: str | Path | None = None, overrides: list[str] | None = None) -> PipelineConfig:
    """Read the pipeline YAML and compose and validate every stage's config (``cfg.configs``)."""
    cfg = read_pipeline_config(path, overrides)
    cfg.configs = compose_stages(cfg)
    return cfg
