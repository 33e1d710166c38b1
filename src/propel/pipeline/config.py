"""The pipeline config: which template configs each stage runs, what to change in them, and the run-level values
the pipeline keeps the same across stages.

Each stage is a config a user also runs by hand (``propel predict -c configs/math/label.yaml`` ...). A stage
section of the pipeline YAML names its templates (``config``, default ``TEMPLATES``) and sets keys in them,
nested or dotted, exactly as in the template (``data: {init_args: {n_tasks: 240}}`` or
``data.init_args.n_tasks: 240``); ``callbacks`` sets init_args of the template's callbacks by class name. Every
default lives in the templates and the classes' signatures: the pipeline adds none of its own.

The pipeline then sets what must agree across stages, from one table of links (``propel.pipeline.links.LINKS``,
shown in the run's report and in docs/architecture.md): the model, the domain and the seed (the label template's
unless given at the top level), the engine, how the generator samples (``sampling``: one token budget, temperature,
nucleus and group size for labeling, RVP, GRPO and evaluation), every path under ``workdir``, the probe reward's
gate of the RVP sample (the GRPO stage's ``ProbeReward``'s) and the evaluation's solver (the label stage's, so
utility means what the probe was trained on; only ``n_trials`` is the evaluation's own). A stage section that sets
one of these to another value is refused, naming the link.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from propel.errors import ConfigError
from propel.paths import config_path

STAGES = ("label", "probe", "grpo", "evaluate")
"""The default run: PROPEL end to end."""
WARM_START = "warm_start"
"""The optional stage before ``grpo``: GRPO against the validity gate alone, whose checkpoint the GRPO stage continues
(``PipelineConfig.warm_start``). Listed in ``stages`` to run: ``[label, probe, warm_start, grpo, evaluate]``."""
GATE_ARM = "gate_arm"
"""The optional stage after ``grpo``: GRPO continuing the warm start with the validity gate alone, for as many steps
as the GRPO stage (``PipelineConfig.gate_arm``). Evaluation compares the trained generator with it: what the GRPO
stage's reward added beyond more of the gate, from the same start, seed and contexts."""
COEVOLUTION_STAGES = ("aux_pool", "aux_probe", "constrained", "auxiliary", "arms")
"""Adversarial probe co-evolution after it (``propel.pipeline.coevolution``): the auxiliary pool from the GRPO stage's
mined false positives and collapsed topic, the auxiliary probe, GRPO under ``min(main, auxiliary)``, optionally GRPO
under the auxiliary probe alone, and every arm evaluated in one table (``configs/coevolution.yaml``)."""
ALL_STAGES = ("label", "probe", WARM_START, "grpo", GATE_ARM, "evaluate") + COEVOLUTION_STAGES
"""Every stage, in the order a run takes them."""
TEMPLATES: dict[str, list[str]] = {
    "label": ["configs/math/label.yaml"],
    "probe": ["configs/probe/sweep.yaml"],
    "grpo": ["configs/grpo/base.yaml", "configs/math/grpo.yaml"],
    "evaluate": ["configs/math/eval.yaml"],
}
"""The templates a stage composes when its section names none (paths relative to the working directory, then to
the source checkout)."""
STAGE_SUBCOMMAND = {
    "label": "predict",
    WARM_START: "fit",
    "grpo": "fit",
    GATE_ARM: "fit",
    "evaluate": "test",
    "constrained": "fit",
    "auxiliary": "fit",
}
"""The ``propel`` subcommand that runs each Lightning stage (the probe stage runs ``propel probe``)."""


@dataclass
class Sampling:
    """How every stage that samples the generator samples it: labeling (``generator_*``), the probe stage's RVP
    sample (``rvp.*``), GRPO and evaluation (``generator_*``). One value each, fanned out by the links table; null
    takes the template's (``propel.pipeline.links.RUN_VALUES``)."""

    max_new_tokens: int | None = None
    """The token budget of one generated task; null: the label template's ``max_new_tokens``."""
    temperature: float | None = None
    """The generator's sampling temperature; null: the label template's ``temperature``."""
    top_p: float | None = None
    """The generator's nucleus (labeling, GRPO, evaluation); null: the label template's ``top_p``."""
    group_size: int | None = None
    """Samples per context of GRPO and of RVP (whose reward variance is GRPO's); null: the GRPO template's."""


@dataclass
class PipelineConfig:
    """The whole run. ``configs`` holds each stage's composed, validated config (filled by ``load_pipeline_config``)."""

    workdir: str = "runs/pipeline"
    model: str | None = None
    """Generator = frozen reference = solver base model; None keeps the label template's ``generator``."""
    domain: dict[str, Any] | None = None
    """Task domain (``class_path``/``init_args``) of every stage; None keeps the label template's."""
    seed: int | None = None
    """Seed of every stage (evaluation draws contexts with ``seed + 1``); None keeps the label template's."""
    engine: str = "auto"
    """Rollout engine of the label, GRPO and evaluate stages: ``hf``, ``vllm``, ``vllm_server`` or ``auto`` (vllm
    when it is importable, else hf)."""
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    """Engine arguments (e.g. ``{dtype: bfloat16}`` for vllm, ``{base_url: ...}`` for vllm_server)."""
    sampling: Sampling = field(default_factory=Sampling)
    """One token budget, temperature, nucleus and group size for every stage that samples the generator."""
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    label: dict[str, Any] = field(default_factory=dict)
    probe: dict[str, Any] = field(default_factory=dict)
    warm_start: dict[str, Any] = field(default_factory=dict)
    """Keys set over the GRPO stage's for the warm start (stage ``warm_start``): its reward is the validity gate alone
    (``ValidityReward``) unless ``model.init_args.rewards`` is set here; ``trainer.max_steps`` is its own. The GRPO
    stage then continues its checkpoint (LoRA weights, optimizer state, stream position) up to
    ``grpo.trainer.max_steps``, which counts as Lightning counts a resumed run's steps: from the start of the warm
    start (24 warm-start steps + 12 against the probe: ``grpo.trainer.max_steps: 36``). Worth it when the generator
    starts mostly invalid: there the gate's floor makes most of the reward variance, and the probe's ranking of valid
    tasks only counts once validity is high (docs/experiments.md). Listed before ``label``
    (``[warm_start, label, probe, grpo, evaluate]``), the label stage labels the warm start's tasks."""
    grpo: dict[str, Any] = field(default_factory=dict)
    gate_arm: dict[str, Any] = field(default_factory=dict)
    """Keys set over the GRPO stage's for the gate-continued arm (stage ``gate_arm``): it continues the warm start
    with the validity gate alone up to ``grpo.trainer.max_steps`` (the links keep the two equal)."""
    evaluate: dict[str, Any] = field(default_factory=dict)
    aux_pool: dict[str, Any] = field(default_factory=dict)
    """``AuxPoolSpec`` keys: the collapsed-topic rule and which pools give negatives."""
    aux_probe: dict[str, Any] = field(default_factory=dict)
    """Keys set over the probe stage's (the auxiliary probe runs the same sweep and selection)."""
    constrained: dict[str, Any] = field(default_factory=dict)
    """Keys set over the GRPO stage's for the constrained run (``config`` names other templates)."""
    auxiliary: dict[str, Any] = field(default_factory=dict)
    """Keys set over the GRPO stage's for the auxiliary-only run."""
    arms: dict[str, Any] = field(default_factory=dict)
    """``ArmsSpec`` keys: which policies the arms table evaluates."""
    configs: dict[str, Any] = field(default_factory=dict)
    links: list[dict[str, Any]] = field(default_factory=list)
    """The links applied (source, target, value, why), filled with ``configs``: the report prints them."""

    @property
    def root(self) -> Path:
        return Path(self.workdir)

    @property
    def engine_kind(self) -> str:
        """The engine the stages use: ``auto`` resolved to ``vllm`` when vLLM is installed, else ``hf``."""
        if self.engine != "auto":
            return self.engine
        import importlib.util

        return "vllm" if importlib.util.find_spec("vllm") is not None else "hf"

    def runs_before(self, first: str, second: str) -> bool:
        """Whether both stages run and ``first`` comes before ``second`` (the label stage after ``warm_start``
        labels the warm start's tasks)."""
        stages = list(self.stages)
        return first in stages and second in stages and stages.index(first) < stages.index(second)

    @property
    def solver(self) -> dict:
        """The label stage's solver settings (``SolverSpec`` fields)."""
        return self.configs["label"]["model"]["init_args"]["solver"]

    def evaluate_config(self, name: str, adapter: str | None, stage: str = "evaluate") -> dict:
        """The evaluate stage's config for the base (``adapter=None``) or a trained policy, writing to
        ``stage/name``."""
        out = str(self.root / stage / name)
        config = copy.deepcopy(self.configs["evaluate"])
        config["trainer"]["default_root_dir"] = out
        config["model"]["init_args"].update(output_dir=out, adapter=adapter)
        config["data"]["init_args"]["pool_dir"] = out
        return config


def template_path(path: str) -> Path:
    """A stage template as given, else the shipped config it names (``configs/...`` works from any folder and from an
    installed package: ``propel.paths.config_path``)."""
    return config_path(path)


def read_pipeline_config(path: str | Path | None = None, overrides: list[str] | None = None) -> PipelineConfig:
    """Read the pipeline YAML (omegaconf: ``${...}`` interpolation, ``key=value`` overrides) into a
    ``PipelineConfig`` whose stage configs are not composed yet (``stage_configs.load_pipeline_config`` does both).
    Unknown keys and bad values end in a one-line ``ConfigError`` naming the key."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    base = OmegaConf.structured(PipelineConfig)
    try:
        layers = [OmegaConf.load(config_path(path))] if path else []
        layers.append(OmegaConf.from_dotlist(list(overrides or [])))
        merged = OmegaConf.merge(base, *layers)
        OmegaConf.resolve(merged)
        cfg: PipelineConfig = OmegaConf.to_object(merged)
    except FileNotFoundError as err:
        raise ConfigError(f"pipeline config file does not exist: {path}") from err
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or ""
        raise ConfigError(f"pipeline config key {key!r}: {str(err).splitlines()[0]}") from None
    if cfg.engine not in ("auto", "hf", "vllm", "vllm_server"):
        raise ConfigError(f"pipeline config key 'engine': choose auto, hf, vllm or vllm_server, got {cfg.engine!r}")
    unknown = [s for s in cfg.stages if s not in ALL_STAGES]
    if unknown:
        raise ConfigError(f"pipeline config key 'stages': unknown stage(s) {unknown}; choose from {list(ALL_STAGES)}")
    _check_order(cfg)
    return cfg


def _check_order(cfg: PipelineConfig) -> None:
    """Each stage after the stages whose outputs it reads: the probe after label, grpo after probe, evaluate after
    the policies it evaluates."""
    if GATE_ARM in cfg.stages and WARM_START not in cfg.stages:
        raise ConfigError(
            f"pipeline config key 'stages': {GATE_ARM} continues the warm start with the gate alone; list "
            f"{WARM_START} before it (e.g. [warm_start, label, probe, grpo, gate_arm, evaluate])"
        )
    after = {
        "probe": ("label",),
        "grpo": ("probe", WARM_START),
        GATE_ARM: (WARM_START,),
        "evaluate": ("grpo", WARM_START, GATE_ARM),
    }
    for stage, earlier in after.items():
        late = [e for e in earlier if cfg.runs_before(stage, e)]
        if late:
            raise ConfigError(
                f"pipeline config key 'stages': {stage} reads what {late[0]} writes, so it runs after it "
                f"(e.g. [label, probe, warm_start, grpo, evaluate] or [warm_start, label, probe, grpo, evaluate]), "
                f"got {list(cfg.stages)}"
            )
