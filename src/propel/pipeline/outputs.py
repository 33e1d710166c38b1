"""What a finished stage hands the stages after it: its typed outputs, and one table of where each one goes.

The links table (``propel.pipeline.links``) holds values known before any stage runs. A few values exist only once a
stage has finished: the warm start's adapter and checkpoint, the GRPO stages' adapters. Each is a field of
``StageOutputs`` (read from the stage's folder and summary), and ``HANDED_ON`` says which stage takes it, at which key
and why, with the stage it comes after; ``hand_on`` applies the rows that reach a stage. A row whose source stage does
not run before the target (a run without a warm start) is skipped; one whose source ran but has not finished is an
error that names it. ``docs/architecture.md`` shows the table (``table()``).
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, fields
from typing import Any

from propel.errors import ConfigError
from propel.pipeline.config import GATE_ARM, WARM_START, PipelineConfig


@dataclass(frozen=True)
class StageOutputs:
    """A finished stage's outputs; None where the stage makes no such thing."""

    adapter: str | None = None
    """The policy's last LoRA adapter folder (a GRPO stage's ``adapters/step-<n>``)."""
    checkpoint: str | None = None
    """The run's final checkpoint (LoRA weights, optimizer and random state, stream position): a GRPO stage's."""
    pool: str | None = None
    """The labeled pool's folder (the label stage's)."""
    artifact: str | None = None
    """The probe artifact's folder (the probe stage's)."""

    @classmethod
    def read(cls, cfg: PipelineConfig, stage: str) -> StageOutputs | None:
        """The outputs of ``stage`` in this run's folder; None until the stage has written its summary."""
        folder = cfg.root / stage
        path = folder / "summary.json"
        if not path.exists():
            return None
        summary = json.loads(path.read_text())
        checkpoint = folder / "checkpoints" / "last.ckpt"
        artifact = folder / "artifact"
        return cls(
            adapter=summary.get("adapter"),
            checkpoint=str(checkpoint) if checkpoint.exists() else None,
            pool=summary.get("pool"),
            artifact=str(artifact) if artifact.exists() else None,
        )


OUTPUT_NAMES = tuple(f.name for f in fields(StageOutputs))


@dataclass(frozen=True)
class HandOn:
    """One output of a finished stage that a later stage takes."""

    source: str
    """``<stage>:<output>``, the output a ``StageOutputs`` field."""
    target: str
    """``<stage>.<key>`` of the stage config that takes it; ``<stage>[<run>]`` for one of a stage's runs (the
    evaluation's per-policy runs); ``<stage>.ckpt_path`` is the checkpoint ``propel fit`` starts from."""
    why: str
    """What the later stage does with it."""
    only_if: str | None = None
    """A key of the target stage's config that must be truthy (absent counts as true) for the row to apply."""

    def __post_init__(self) -> None:
        stage, _, output = self.source.partition(":")
        if not stage or output not in OUTPUT_NAMES:
            raise ValueError(f"source must be <stage>:<one of {OUTPUT_NAMES}>, got {self.source!r}")

    @property
    def source_stage(self) -> str:
        return self.source.split(":")[0]

    @property
    def output(self) -> str:
        return self.source.split(":")[1]

    @property
    def stage(self) -> str:
        return self.target.split(".", 1)[0].split("[", 1)[0]

    @property
    def run(self) -> str | None:
        """The run of the target stage the row is for (``evaluate[trained]`` -> ``trained``), or None."""
        head = self.target.split(".", 1)[0]
        return head[head.index("[") + 1 : -1] if "[" in head else None

    @property
    def key(self) -> str:
        return self.target.split(".", 1)[1]


LABELS_THE_WARM_START = (
    "labels the warm start's tasks: a gate-trained generator's are mostly valid, so the probe gets several times the "
    "valid rows, from the distribution the GRPO stage samples"
)
CONTINUES = "continues the warm start's run (LoRA weights, optimizer and random state, stream position)"
EVALUATED = "evaluated beside the base policy on fresh tasks with real solver trials"
HANDED_ON: tuple[HandOn, ...] = (
    HandOn(f"{WARM_START}:adapter", "label.model.init_args.adapter", LABELS_THE_WARM_START),
    HandOn(
        f"{WARM_START}:adapter",
        "probe.rvp.adapter",
        "the RVP sample (selection's tiebreak) comes from the policy the GRPO stage continues",
        only_if="probe.rvp.contexts",
    ),
    HandOn(f"{WARM_START}:checkpoint", "grpo.ckpt_path", CONTINUES),
    HandOn(f"{WARM_START}:checkpoint", f"{GATE_ARM}.ckpt_path", CONTINUES + ", with the gate alone"),
    HandOn(f"{WARM_START}:adapter", f"evaluate[{WARM_START}].model.init_args.adapter", EVALUATED),
    HandOn(f"{GATE_ARM}:adapter", f"evaluate[{GATE_ARM}].model.init_args.adapter", EVALUATED),
    HandOn("grpo:adapter", "evaluate[trained].model.init_args.adapter", EVALUATED),
)


def _truthy(config: dict, key: str) -> bool:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return True
        node = node[part]
    return bool(node)


def hand_on(cfg: PipelineConfig, stage: str, run: str | None = None) -> dict[str, Any]:
    """``{key: value}`` of the finished stages' outputs that reach ``stage`` (its run ``run``), whose source stage
    runs before it (``only_if`` read in the stage's composed config). ConfigError when such a source stage has not
    finished or lacks the output."""
    config = cfg.configs.get(stage, {})
    values: dict[str, Any] = {}
    for row in HANDED_ON:
        if row.stage != stage or row.run != run or not cfg.runs_before(row.source_stage, stage):
            continue
        if row.only_if is not None and not _truthy({stage: config}, row.only_if):
            continue
        outputs = StageOutputs.read(cfg, row.source_stage)
        value = getattr(outputs, row.output) if outputs is not None else None
        if value is None:
            raise ConfigError(
                f"the {stage} stage takes the {row.source_stage} stage's {row.output} ({row.why}), and the "
                f"{row.source_stage} stage has not finished ({cfg.root / row.source_stage / 'summary.json'} is "
                f"missing or names no {row.output})"
            )
        values[row.key] = value
    return values


def with_outputs(cfg: PipelineConfig, stage: str) -> dict:
    """``stage``'s composed config with the outputs it takes set at their keys (``ckpt_path`` is left out: ``propel
    fit`` takes it as an argument, see ``hand_on``)."""
    config = cfg.configs[stage]
    values = {k: v for k, v in hand_on(cfg, stage).items() if k != "ckpt_path"}
    if not values:
        return config
    config = copy.deepcopy(config)
    for key, value in values.items():
        *parents, leaf = key.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return config


def table(rows: tuple[HandOn, ...] = HANDED_ON) -> str:
    """The rows as a markdown table: what ``docs/architecture.md`` shows."""
    lines = ["| after | output | taken at | why |", "|---|---|---|---|"]
    for row in rows:
        why = row.why + (f" (when `{row.only_if}` is set)" if row.only_if else "")
        lines.append(f"| `{row.source_stage}` | `{row.output}` | `{row.target}` | {why} |")
    return "\n".join(lines) + "\n"
