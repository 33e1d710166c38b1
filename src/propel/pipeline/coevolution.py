"""Adversarial probe co-evolution as pipeline stages (the PROPEL paper's §6 and App. 12), after label, probe and GRPO:

1. ``aux_pool``: the auxiliary probe's pool (``propel.pools.auxiliary``): the original positives; as negatives the
   GRPO stage's mined false positives (``AdversarialProbeMining`` in its templates) and the valid tasks of the topic
   the single-probe run collapsed to.
2. ``aux_probe``: the probe stage's sweep and selection on that pool (``propel probe``, its own artifact).
3. ``constrained``: the GRPO stage's run with the reward on valid tasks ``min(main, auxiliary)``
   (``ProbeReward(constraint=...)``); ``auxiliary`` (optional): the same under the auxiliary probe alone.
4. ``arms``: base, single-probe, constrained (and auxiliary-only) policies evaluated with real solver trials, in one
   table with intervals and the changes between arms.

Each stage writes ``workdir/<stage>/summary.json`` when done, so a rerun skips it; the GRPO runs resume from their
``checkpoints/last.ckpt`` and the arms stage from each arm's finished evaluation.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from propel.durable import write_json
from propel.errors import ConfigError, PropelError
from propel.pipeline.config import PipelineConfig
from propel.pipeline.stages import read_summary, run_grpo, write_config

TOPIC_SOURCES = ("mined", "evaluation")
ARM_STAGES = {"base": None, "single": "grpo", "constrained": "constrained", "auxiliary": "auxiliary"}
"""Each arm of the comparison and the GRPO stage whose last adapter it evaluates (None: the base policy)."""


@dataclass
class AuxPoolSpec:
    """How the auxiliary pool is built (the pipeline section ``aux_pool``)."""

    topic: str | None = None
    """The collapsed topic by name (as the domain's ``topic`` names it); None finds it by the rule below."""
    topic_from: list[str] = field(default_factory=lambda: list(TOPIC_SOURCES))
    """Pools whose valid rows decide the collapsed topic and give its negatives: ``mined`` (the GRPO stage's mined
    tasks), ``evaluation`` (the single-probe policy's evaluation pool, when the evaluate stage ran)."""
    min_topic_share: float = 0.0
    """The most common topic counts as collapsed only at this share of those rows or more (0: always)."""
    keep_negatives: bool = False
    """Also keep the original corpus's valid negatives."""

    def __post_init__(self) -> None:
        bad = [s for s in self.topic_from if s not in TOPIC_SOURCES]
        if bad:
            raise ConfigError(f"pipeline config key 'aux_pool.topic_from': unknown {bad}; choose from {TOPIC_SOURCES}")
        if not 0.0 <= self.min_topic_share <= 1.0:
            raise ConfigError(f"pipeline config key 'aux_pool.min_topic_share': in [0, 1], got {self.min_topic_share}")


@dataclass
class ArmsSpec:
    """Which policies the arms table evaluates (the pipeline section ``arms``)."""

    arms: list[str] | None = None
    """Arms in table order, from ``base``, ``single``, ``constrained``, ``auxiliary``; None: base, single,
    constrained, and auxiliary when that stage is configured."""

    def __post_init__(self) -> None:
        bad = [a for a in self.arms or [] if a not in ARM_STAGES]
        if bad:
            raise ConfigError(f"pipeline config key 'arms.arms': unknown {bad}; choose from {list(ARM_STAGES)}")


def spec_dict(cls, section: dict, name: str) -> dict:
    """A section checked against ``cls``'s fields (a wrong key is named with the closest one) as plain values."""
    fields = [f.name for f in dataclasses.fields(cls)]
    for key in section:
        if key not in fields:
            close = difflib.get_close_matches(str(key), fields, n=1)
            hint = f" Did you mean: '{name}.{close[0]}'?" if close else f" Accepted: {fields}."
            raise ConfigError(f"pipeline config key '{name}.{key}': not accepted.{hint}")
    return dataclasses.asdict(cls(**section))


def run_aux_pool(cfg: PipelineConfig) -> dict:
    """Build ``workdir/aux_pool/pool`` from the label pool, the GRPO stage's mined pool and the topic rule."""
    from propel.pools.auxiliary import adversarial_pool

    root, out = cfg.root, cfg.root / "aux_pool"
    start = time.monotonic()
    spec = cfg.configs["aux_pool"]
    write_config(spec, out / "config.yaml")
    pool = out / "pool"
    for part in pool.glob("part-*.parquet"):  # a run cut short after writing: rebuild, the result is the same
        part.unlink()
    sources = {"mined": root / "grpo" / "mined", "evaluation": root / "evaluate" / "trained"}
    topic_from = [str(sources[s]) for s in spec["topic_from"] if sources[s].is_dir()]
    try:
        info = adversarial_pool(
            root / "label" / "pool",
            sources["mined"],
            pool,
            keep_negatives=spec["keep_negatives"],
            topic_from=topic_from,
            topic=spec["topic"],
            min_topic_share=spec["min_topic_share"],
        )
    except ValueError as err:
        raise PropelError(
            f"aux_pool: {err}. Give the auxiliary probe something to learn: train the single-probe run longer "
            "(grpo.trainer.max_steps), mine more (grpo.callbacks.AdversarialProbeMining), or name a topic "
            "(aux_pool.topic)"
        ) from None
    info.update(pool=str(pool), topic_from=topic_from, seconds=time.monotonic() - start)
    write_json(out / "summary.json", info)
    return info


def run_aux_probe(cfg: PipelineConfig) -> dict:
    """``propel probe`` on the auxiliary pool: the probe stage's sweep and selection, its own artifact."""
    from propel.jobs.probe_job import main as probe_main

    path = write_config(cfg.configs["aux_probe"], cfg.root / "aux_probe" / "config.yaml")
    return probe_main(["-c", str(path)])


def run_constrained(cfg: PipelineConfig) -> dict:
    """GRPO under ``min(main, auxiliary)`` into ``workdir/constrained``."""
    return run_grpo(cfg, "constrained")


def run_auxiliary(cfg: PipelineConfig) -> dict:
    """GRPO under the auxiliary probe alone into ``workdir/auxiliary``."""
    return run_grpo(cfg, "auxiliary")


def arm_names(cfg: PipelineConfig) -> list[str]:
    """The arms the table holds (``ArmsSpec.arms`` or the default)."""
    given = cfg.configs["arms"].get("arms")
    if given:
        return list(given)
    return [a for a, stage in ARM_STAGES.items() if stage is None or stage == "grpo" or stage in cfg.stages]


def _arm_folder(cfg: PipelineConfig, arm: str) -> Path:
    """Where an arm's evaluation lives: the evaluate stage's folder for base and single when that stage ran them
    (the same config but for paths), else ``workdir/arms/<arm>``."""
    from propel.lit_modules.evaluation import SUMMARY

    earlier = {"base": "base", "single": "trained"}.get(arm)
    if earlier and (cfg.root / "evaluate" / earlier / SUMMARY).exists():
        return cfg.root / "evaluate" / earlier
    return cfg.root / "arms" / arm


def run_arms(cfg: PipelineConfig) -> dict:
    """Evaluate every arm (resuming: a finished arm is read back), then the table and the changes between arms."""
    from propel.cli.lightning_cli import run_lightning
    from propel.lit_modules.evaluation import SCORES, SUMMARY
    from propel.pipeline.compare import arms_lift, arms_table
    from propel.pipeline.config import STAGE_SUBCOMMAND
    from propel.pools.auxiliary import dominant_topic
    from propel.pools.io import read_pool

    out = cfg.root / "arms"
    start = time.monotonic()
    write_config(cfg.configs["arms"], out / "config.yaml")
    arms: dict[str, dict] = {}
    for arm in arm_names(cfg):
        stage = ARM_STAGES[arm]
        adapter = None
        if stage is not None:
            adapter = (read_summary(cfg, stage) or {}).get("adapter")
            if not adapter:
                raise ConfigError(f"arms: the {arm!r} arm needs the {stage} stage's adapter; run that stage first")
        folder = _arm_folder(cfg, arm)
        if not (folder / SUMMARY).exists():
            run_lightning(
                STAGE_SUBCOMMAND["evaluate"],
                write_config(cfg.evaluate_config(arm, adapter, "arms"), folder / "config.yaml"),
            )
        scores = folder / SCORES
        topic, share, _ = dominant_topic([read_pool(folder)])
        arms[arm] = {
            "folder": str(folder),
            "adapter": adapter,
            "summary": json.loads((folder / SUMMARY).read_text()),
            "scores": json.loads(scores.read_text()) if scores.exists() else None,
            "top_topic": topic,
            "top_topic_share_valid": share,
        }
    table = arms_table({a: v["summary"] for a, v in arms.items()}, {a: v["top_topic"] for a, v in arms.items()})
    lifts = arms_lift({a: (v["summary"], v["scores"]) for a, v in arms.items()})
    (out / "arms.md").write_text(table)
    summary = {
        "arms": {a: {k: v for k, v in d.items() if k != "scores"} for a, d in arms.items()},
        "table": table,
        "lift": lifts,
        "seconds": time.monotonic() - start,
    }
    write_json(out / "summary.json", summary)
    return summary


RUNNERS = {
    "aux_pool": run_aux_pool,
    "aux_probe": run_aux_probe,
    "constrained": run_constrained,
    "auxiliary": run_auxiliary,
    "arms": run_arms,
}
