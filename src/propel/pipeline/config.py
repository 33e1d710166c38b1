"""The pipeline config: one YAML with a section per stage; every default lives in these dataclasses."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from propel.errors import ConfigError

STAGES = ("label", "probe", "grpo", "evaluate")


@dataclass
class LabelSpec:
    """Collect + label a task pool (``propel predict`` with LabelingModule)."""

    n_tasks: int = 96
    n_trials: int = 8
    band: list[int] = field(default_factory=lambda: [1, 3])
    """Inclusive solve-count band that makes a task positive."""
    batch_size: int = 16
    generator_max_new_tokens: int = 64
    generator_temperature: float = 1.0
    solver_max_new_tokens: int = 64
    solver_temperature: float = 1.0


@dataclass
class ProbeSpec:
    """Extract frozen-reference activations over the pool, sweep probes, select one, export the artifact."""

    layers: list[int] = field(default_factory=lambda: [6, 12, 18, 24])
    poolings: list[str] = field(default_factory=lambda: ["last_token", "mean_full"])
    archs: list[str] = field(default_factory=lambda: ["linear", "mlp"])
    balances: list[str] = field(default_factory=lambda: ["downsample", "weighted"])
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    max_ece: float = 0.1
    split: str = "random"
    """``random`` 80/10/10, or ``stratified_kfold`` for small pools (every row is held out once; metrics are the
    mean over folds)."""
    n_folds: int = 5
    """Folds of ``stratified_kfold``."""
    batch_size: int = 8
    max_length: int = 512
    rvp_contexts: int = 8
    """Contexts of the fixed base-policy sample that RVP is measured on (0 skips RVP)."""
    rvp_group_size: int = 4
    """Samples per context in that sample (GRPO's within-group variance)."""


@dataclass
class GRPOSpec:
    """Generator RL against the validity-gated probe reward (``propel fit`` with GRPOModule)."""

    max_steps: int = 20
    contexts_per_step: int = 2
    group_size: int = 8
    max_new_tokens: int = 64
    temperature: float = 1.0
    lr: float = 1e-4
    beta: float = 0.04
    loss_type: str = "grpo"
    reward_mode: str = "hard_gate"
    invalid_penalty: float = -1.0
    checkpoint_every: int = 5
    extra: dict[str, Any] = field(default_factory=dict)
    """More GRPOModule init_args, passed through."""


@dataclass
class EvaluateSpec:
    """Fresh tasks from base and trained policies, k solver trials each (``propel test``)."""

    n_tasks: int = 32
    n_trials: int = 8
    batch_size: int = 16


@dataclass
class PipelineConfig:
    """The whole run. ``model`` is generator = frozen reference = solver unless ``solver`` is set."""

    workdir: str = "runs/pipeline"
    model: str = "smollm2-135m-instruct"
    solver: str | None = None
    domain: dict[str, Any] = field(default_factory=lambda: {"class_path": "propel.domains.MathExpressionDomain"})
    seed: int = 0
    engine: str = "auto"
    """Rollout engine of the label, GRPO and evaluate stages: ``hf``, ``vllm``, ``vllm_server`` or ``auto`` (vllm
    when it is importable, else hf)."""
    engine_kwargs: dict[str, Any] = field(default_factory=dict)
    """Engine arguments (e.g. ``{dtype: bfloat16}`` for vllm, ``{base_url: ...}`` for vllm_server)."""
    stages: list[str] = field(default_factory=lambda: list(STAGES))
    label: LabelSpec = field(default_factory=LabelSpec)
    probe: ProbeSpec = field(default_factory=ProbeSpec)
    grpo: GRPOSpec = field(default_factory=GRPOSpec)
    evaluate: EvaluateSpec = field(default_factory=EvaluateSpec)

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


def load_pipeline_config(path: str | Path | None = None, overrides: list[str] | None = None) -> PipelineConfig:
    """Read YAML over the dataclass defaults (omegaconf: ``${...}`` interpolation, ``key=value`` overrides).

    Unknown keys and wrong types end in a one-line ``ConfigError`` naming the key.
    """
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    base = OmegaConf.structured(PipelineConfig)
    try:
        layers = [OmegaConf.load(path)] if path else []
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
    if cfg.probe.split not in ("random", "stratified_kfold"):
        raise ConfigError(
            f"pipeline config key 'probe.split': choose random or stratified_kfold, got {cfg.probe.split!r}"
        )
    unknown = [s for s in cfg.stages if s not in STAGES]
    if unknown:
        raise ConfigError(f"pipeline config key 'stages': unknown stage(s) {unknown}; choose from {list(STAGES)}")
    lo, hi = (list(cfg.label.band) + [None, None])[:2]
    if lo is None or hi is None or not 0 <= lo <= hi <= min(cfg.label.n_trials, cfg.evaluate.n_trials):
        raise ConfigError(
            f"pipeline config key 'label.band': need 0 <= lo <= hi <= n_trials (label {cfg.label.n_trials}, "
            f"evaluate {cfg.evaluate.n_trials}), got {list(cfg.label.band)}"
        )
    return cfg
