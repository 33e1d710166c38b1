"""Run the pipeline's stages in order, skipping finished ones, then write the report."""

from __future__ import annotations

import sys
import time

from rich.console import Console

from propel.errors import ConfigError
from propel.pipeline.config import PipelineConfig
from propel.pipeline.stage_configs import load_pipeline_config


def peak_rss_gb() -> float | None:
    """This process's peak resident set so far, in GB (the stages run in it, so the largest stage's plus what
    earlier ones left); None where the platform has no ``resource`` module."""
    try:
        import resource
    except ImportError:  # Windows
        return None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return peak / (1e9 if sys.platform == "darwin" else 1e6)


def run_pipeline(cfg: PipelineConfig, console: Console | None = None) -> dict[str, dict]:
    """Run every configured stage whose ``summary.json`` is missing; returns each stage's summary."""
    from propel.pipeline import stages as stage_fns
    from propel.pipeline.coevolution import RUNNERS as COEVOLUTION
    from propel.pipeline.summary_report import build_report

    runners = {
        "label": stage_fns.run_label,
        "probe": stage_fns.run_probe,
        "warm_start": stage_fns.run_warm_start,
        "grpo": stage_fns.run_grpo,
        "gate_arm": lambda cfg: stage_fns.run_grpo(cfg, "gate_arm"),
        "evaluate": stage_fns.run_evaluate,
        **COEVOLUTION,
    }

    console = console or Console(stderr=True)
    cfg.root.mkdir(parents=True, exist_ok=True)
    summaries: dict[str, dict] = {}
    for i, name in enumerate(cfg.stages, 1):
        done = stage_fns.read_summary(cfg, name)
        changed = stage_fns.changed_settings(cfg, name)
        if done is not None:
            console.print(f"[bold]stage {i}/{len(cfg.stages)} {name}[/]: done earlier, skipped")
            if changed:
                console.print(
                    f"[yellow]  it ran with other settings ({'; '.join(changed[:5])}); delete {cfg.root / name} "
                    "to run it again with these[/]"
                )
            summaries[name] = done
            continue
        if changed:
            raise ConfigError(
                f"{cfg.root / name} was started with other settings ({'; '.join(changed[:5])}): resuming would mix "
                "the two. Rerun with the same settings, or use another workdir (or delete that folder)."
            )
        console.rule(f"stage {i}/{len(cfg.stages)}: {name}")
        start = time.monotonic()
        runners[name](cfg)
        summaries[name] = stage_fns.read_summary(cfg, name)  # what a later rerun will read, exactly
        peak = peak_rss_gb()
        memory = f", peak memory so far {peak:.1f} GB" if peak is not None else ""
        console.print(f"[bold]stage {name}[/] finished in {time.monotonic() - start:.0f}s{memory}")
    report = build_report(cfg, summaries)
    console.print(f"report: {report}")
    return summaries


def main(args: list[str]) -> None:
    """``propel pipeline -c CONFIG [key=value ...]``."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="propel pipeline",
        description="Run the PROPEL stages a config lists, in its order, skipping finished ones and resuming one cut "
        "short, then write the report. The demo (`propel pipeline -c configs/demo.yaml`) runs warm_start (GRPO "
        "against the validity gate alone), label (its tasks, by the solver), probe (sweep, selection, the rivals), "
        "grpo (more steps, against the probe stage's reward), gate_arm (as many more against the gate alone, for "
        "comparison), evaluate; without a stages key a config runs label, probe, grpo, evaluate. Adversarial probe "
        "co-evolution adds aux_pool, aux_probe, constrained, auxiliary and arms after them: "
        "`propel pipeline -c configs/coevolution.yaml`. Steps and sizes are the config's (`--print_config`).",
    )
    parser.add_argument(
        "-c",
        "--config",
        help="pipeline YAML (sections: label, probe, grpo, evaluate): a path, or a shipped config's name (demo)",
    )
    parser.add_argument("--print_config", action="store_true", help="print every stage's composed config and exit")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. grpo.trainer.max_steps=5")
    ns = parser.parse_args(args)
    if not ns.config:
        raise ConfigError(
            "propel pipeline needs a config (-c): `propel pipeline -c configs/demo.yaml` runs the demo into runs/demo "
            "(see its header for the time it takes); key=value overrides go after it"
        )
    cfg = load_pipeline_config(ns.config, ns.overrides)
    if ns.print_config:
        import yaml

        print(yaml.safe_dump(cfg.configs, sort_keys=False))
        return
    run_pipeline(cfg)
