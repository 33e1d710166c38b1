"""What the pipeline keeps in step across its stages: one table of links, ``source -> target``, applied by one
function (``apply``), printed into the run's report and into ``docs/architecture.md``.

A source is
- ``run.<name>``: a run-level value (``RUN_VALUES``): the pipeline config's top-level key, or where that is null the
  template value it names (the token budget and sampling settings are the label template's, the group size the GRPO
  template's);
- ``run.<name>/<path>``: a path under that folder (``run.dir`` is the target stage's own folder, ``workdir/<stage>``);
- ``<stage>.<key>``: another stage's complete config (every default filled in), composed before this one;
- ``=<yaml>``: a constant.

A target is ``<stage>.<key>``, dotted as in the stage's config; ``[Class]`` picks the entries of a list by class name
(``trainer.callbacks[ModelCheckpoint].dirpath``). A ``grpo`` row also applies to the co-evolution's GRPO runs
(``constrained``, ``auxiliary``) and a ``probe`` row to ``aux_probe``, unless such a stage has a row of its own for
that key. A stage section (or its templates) may leave a target out; a section that sets one to a different value is
refused, naming the link: a value kept in step is set once, at its source.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from omegaconf import DictConfig, ListConfig, OmegaConf

from propel.errors import ConfigError

ALWAYS: tuple[str, ...] = ("*",)
LOGGERS = ("propel.loggers.PropelWandbLogger", "lightning.pytorch.loggers.CSVLogger")
"""The loggers of a GRPO run: W&B, and CSV for the per-step metrics the report reads."""


@dataclass(frozen=True)
class Link:
    """One value a stage takes from the run or from another stage."""

    source: str
    """``run.<name>[/<path>]``, ``<stage>.<key>`` or ``=<yaml>`` (see the module docstring)."""
    target: str
    """``<stage>.<key>`` of the stage config that takes the value; ``[Class]`` names list entries by class."""
    why: str
    """What would go wrong if the two differed."""
    required: tuple[str, ...] = ALWAYS
    """When a ``[Class]`` entry the target names must exist in the stage's templates: always (``("*",)``), when one
    of these stages runs, or never (``()``: the link is skipped where the templates hold no such entry)."""
    keep: tuple[str, ...] = ()
    """Keys of the target's own mapping that stay the stage's (the evaluation's ``n_trials``)."""
    null_keeps: bool = False
    """A null source leaves the target as it is (null: the source class's default, which the target's equals)."""

    @property
    def stage(self) -> str:
        return self.target.split(".", 1)[0]

    @property
    def key(self) -> str:
        return self.target.split(".", 1)[1]


RUN_VALUES: dict[str, str] = {
    "model": "`model`, else the label template's `generator`",
    "domain": "`domain`, else the label template's",
    "seed": "`seed`, else the label template's `seed_everything`",
    "evaluation_seed": "`seed` + 1: fresh contexts, apart from the labeled pool's",
    "engine": "`engine` (`auto` resolved)",
    "engine_kwargs": "`engine_kwargs`",
    "max_new_tokens": "`sampling.max_new_tokens`, else the label template's `max_new_tokens`",
    "temperature": "`sampling.temperature`, else the label template's `temperature`",
    "top_p": "`sampling.top_p`, else the label template's `top_p`",
    "group_size": "`sampling.group_size`, else the GRPO template's `group_size`",
    "workdir": "`workdir`",
    "dir": "`workdir/<stage>`: the target stage's own folder",
    "loggers": "W&B (offline unless configured) and CSV loggers writing under `workdir/<stage>`",
}
"""The run-level values a link's ``run.<name>`` source reads, and where each comes from."""

ONE_MODEL = "one model: generator = frozen reference = policy base = solver base"
POOL = "the labeled pool, written and read back (a rerun skips the rows it holds)"
SAME_BUDGET = "one token budget: the probe scores, GRPO trains on and evaluation measures tasks of the length labeled"
SAME_SAMPLER = "one sampler: RVP and evaluation sample the generator as labeling did and GRPO does"
LINKS: tuple[Link, ...] = (
    # --- the run: one model, domain, seed and engine everywhere
    Link("run.model", "label.model.init_args.generator", ONE_MODEL),
    Link("run.model", "probe.reference_model", ONE_MODEL),
    Link("run.model", "grpo.model.init_args.model", ONE_MODEL),
    Link("run.model", "evaluate.model.init_args.generator", ONE_MODEL),
    Link("run.domain", "label.model.init_args.domain", "one task domain"),
    Link("run.domain", "label.data.init_args.domain", "one task domain"),
    Link("run.domain", "probe.domain", "one task domain"),
    Link("run.domain", "grpo.data.init_args.domain", "one task domain"),
    Link("run.domain", "evaluate.model.init_args.domain", "one task domain"),
    Link("run.domain", "evaluate.data.init_args.domain", "one task domain"),
    Link("run.seed", "label.seed_everything", "one seed"),
    Link("run.seed", "label.model.init_args.seed", "one seed"),
    Link("run.seed", "label.data.init_args.seed", "one seed"),
    Link("run.seed", "probe.seed", "one seed"),
    Link("run.seed", "grpo.seed_everything", "one seed"),
    Link("run.seed", "grpo.data.init_args.seed", "one seed"),
    Link("run.seed", "evaluate.seed_everything", "one seed"),
    Link("run.seed", "evaluate.model.init_args.seed", "one seed"),
    Link("run.evaluation_seed", "evaluate.data.init_args.seed", "evaluation contexts apart from the labeled pool's"),
    Link("run.engine", "label.model.init_args.engine", "one engine"),
    Link("run.engine", "probe.engine", "one engine"),
    Link("run.engine", "grpo.model.init_args.engine", "one engine"),
    Link("run.engine", "evaluate.model.init_args.engine", "one engine"),
    Link("run.engine_kwargs", "label.model.init_args.engine_kwargs", "one engine"),
    Link("run.engine_kwargs", "probe.engine_kwargs", "one engine"),
    Link("run.engine_kwargs", "grpo.model.init_args.engine_kwargs", "one engine"),
    Link("run.engine_kwargs", "evaluate.model.init_args.engine_kwargs", "one engine"),
    # --- how the generator samples: one token budget, one temperature and nucleus, one group size
    Link("run.max_new_tokens", "label.model.init_args.max_new_tokens", SAME_BUDGET),
    Link("run.max_new_tokens", "probe.rvp.max_new_tokens", SAME_BUDGET),
    Link("run.max_new_tokens", "grpo.model.init_args.max_new_tokens", SAME_BUDGET),
    Link("run.max_new_tokens", "evaluate.model.init_args.max_new_tokens", SAME_BUDGET),
    Link("run.temperature", "label.model.init_args.temperature", SAME_SAMPLER),
    Link("run.temperature", "probe.rvp.temperature", SAME_SAMPLER),
    Link("run.temperature", "grpo.model.init_args.temperature", SAME_SAMPLER),
    Link("run.temperature", "evaluate.model.init_args.temperature", SAME_SAMPLER),
    Link("run.top_p", "label.model.init_args.top_p", SAME_SAMPLER),
    Link("run.top_p", "grpo.model.init_args.top_p", SAME_SAMPLER),
    Link("run.top_p", "evaluate.model.init_args.top_p", SAME_SAMPLER),
    Link("run.group_size", "grpo.model.init_args.group_size", "RVP reads the within-group reward variance GRPO sees"),
    Link("run.group_size", "probe.rvp.group_size", "RVP reads the within-group reward variance GRPO sees"),
    Link("run.group_size", "probe.rivals.k", "the probe and its rivals compete at GRPO's pick: the best of its group"),
    # --- one stage's settings another reads
    Link(
        "grpo.model.init_args.rewards[ProbeReward].gate",
        "probe.rvp.gate",
        "RVP scores with the reward GRPO trains with",
        null_keeps=True,
    ),
    Link(
        "label.model.init_args.solver.band",
        "probe.rivals.band",
        "the rivals are ranked by the utility the labels were drawn from",
    ),
    Link(
        "label.model.init_args.solver",
        "evaluate.model.init_args.solver",
        "utility means in evaluation what the probe was trained on",
        keep=("n_trials",),
    ),
    Link("label.model.init_args.oracle", "evaluate.model.init_args.oracle", "grading as labeling graded"),
    # --- where each stage reads and writes: under workdir
    Link("run.dir", "label.trainer.default_root_dir", "the stage's folder"),
    Link("run.dir/pool", "label.data.init_args.pool_dir", POOL),
    Link("run.dir/pool", "label.trainer.callbacks[PoolWriter].output_dir", POOL),
    Link("run.workdir/label/pool", "probe.pool", "the probe trains on the labeled pool"),
    Link("run.workdir/aux_pool/pool", "aux_probe.pool", "the auxiliary probe trains on the auxiliary pool"),
    Link("run.dir", "probe.output_dir", "the stage's folder"),
    Link("run.dir", "grpo.trainer.default_root_dir", "the stage's folder"),
    Link("run.loggers", "grpo.trainer.logger", "the per-step metrics the report reads (CSV)"),
    Link("run.dir/checkpoints", "grpo.trainer.callbacks[ModelCheckpoint].dirpath", "a cut run resumes from here"),
    Link(
        "run.dir/adapters",
        "grpo.trainer.callbacks[AdapterSaver].dirpath",
        "evaluation reads the trained adapter",
        required=("evaluate", "arms"),
    ),
    Link("run.dir/mined", "grpo.trainer.callbacks[AdversarialProbeMining].output_dir", "the auxiliary pool", ()),
    Link(
        "run.workdir/probe/artifact",
        "grpo.model.init_args.rewards[ProbeReward].artifact",
        "GRPO trains on the reward the probe stage chose: the probe, or a rival that ranked held-out tasks better",
        required=("probe",),
    ),
    Link(
        "run.workdir/probe/artifact",
        "warm_start.model.init_args.rewards[ProbeReward].artifact",
        "a warm start given a probe reward trains on the probe stage's (its default is the gate alone)",
        (),
    ),
    Link(
        "run.workdir/probe/artifact",
        "gate_arm.model.init_args.rewards[ProbeReward].artifact",
        "the gate arm trains on the validity gate alone (no probe reward to point at)",
        (),
    ),
    Link(
        "grpo.trainer.max_steps",
        "gate_arm.trainer.max_steps",
        "the gate arm continues the warm start to the GRPO stage's step: both arms train as long",
    ),
    Link(
        "run.workdir/probe/artifact",
        "constrained.model.init_args.rewards[ProbeReward].artifact",
        "the main probe",
    ),
    Link(
        "run.workdir/aux_probe/artifact",
        "constrained.model.init_args.rewards[ProbeReward].constraint",
        "reward min(main, auxiliary)",
    ),
    Link(
        "run.workdir/aux_probe/artifact",
        "auxiliary.model.init_args.rewards[ProbeReward].artifact",
        "the auxiliary probe alone",
    ),
    Link("=false", "evaluate.trainer.logger", "evaluation writes its own summary; no W&B run"),
    Link("run.dir/base", "evaluate.model.init_args.output_dir", "the base policy's run (trained runs: their own)"),
)
"""The links, in the order they are applied and shown."""

KIND: dict[str, str] = {
    "warm_start": "grpo",
    "gate_arm": "grpo",
    "constrained": "grpo",
    "auxiliary": "grpo",
    "aux_probe": "probe",
}
"""Stages that take the rows of another (the warm start's and the co-evolution's GRPO runs and probe) besides their
own."""


def stage_links(stage: str, links: tuple[Link, ...] = LINKS) -> list[Link]:
    """The links a stage takes: its own rows, and its kind's rows for keys it has no row for."""
    own = [link for link in links if link.stage == stage]
    keys = {link.key for link in own}
    kind = KIND.get(stage)
    inherited = [link for link in links if kind and link.stage == kind and link.key not in keys]
    return inherited + own


_ENTRY = re.compile(r"^(?P<list>.+?)\[(?P<cls>[A-Za-z_]\w*)\](?:\.(?P<rest>.+))?$")


def entries(container: Any, section: str, cls: str) -> list[Any]:
    """The ``class_path``/``init_args`` entries at ``section`` whose class name is ``cls``."""
    node = OmegaConf.select(container, section) if isinstance(container, DictConfig) else _plain_get(container, section)
    items = node if isinstance(node, list | ListConfig) else [node] if isinstance(node, dict | DictConfig) else []
    return [i for i in items if isinstance(i, dict | DictConfig) and str(i.get("class_path", "")).split(".")[-1] == cls]


def _plain_get(config: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(config, Mapping) or part not in config:
            raise KeyError(key)
        config = config[part]
    return config


def read(config: Mapping, key: str) -> Any:
    """``key`` of a complete (plain) stage config; ``[Class]`` reads the first such entry's init_args. KeyError when
    it is absent."""
    match = _ENTRY.match(key)
    if not match:
        return _plain_get(config, key)
    found = entries(config, match["list"], match["cls"])
    if not found:
        raise KeyError(key)
    args = found[0].get("init_args") or {}
    return _plain_get(args, match["rest"]) if match["rest"] else found[0]


def _write(node: DictConfig, key: str, value: Any) -> int:
    """Set ``key`` in a stage's composed node (a mapping value replaces what is there: a domain's init_args never
    mix); returns how many places took it (0: a ``[Class]`` entry the templates lack)."""
    match = _ENTRY.match(key)
    if not match:
        OmegaConf.update(node, key, value, merge=False, force_add=True)
        return 1
    found = entries(node, match["list"], match["cls"])
    for entry in found:
        if entry.get("init_args") is None:
            entry.init_args = {}
        OmegaConf.update(entry.init_args, match["rest"], value, merge=False, force_add=True)
    return len(found)


def given_keys(section: Mapping) -> dict[str, Any]:
    """A pipeline section's keys as dotted leaves in the links' syntax (``callbacks: {C: {k: v}}`` is
    ``trainer.callbacks[C].k``); ``config`` (the templates) is not a key."""
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, Mapping) and value:
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else str(k), v)
        else:
            out[prefix] = value

    for key, value in section.items():
        if key == "config":
            continue
        if key == "callbacks":
            for cls, args in (value or {}).items():
                for arg, v in (args or {}).items():
                    walk(f"trainer.callbacks[{cls}].{arg}", v)
            continue
        walk(str(key), value)
    return out


def _refuse_disagreement(link: Link, stage: str, value: Any, given: Mapping[str, Any]) -> None:
    """A section key at (or under) the link's target set to another value than the link's: refused."""
    for key, mine in given.items():
        if key != link.key and not key.startswith(link.key + "."):
            continue
        rest = key[len(link.key) + 1 :]
        if rest and rest.split(".")[0] in link.keep:
            continue
        try:
            wanted = _plain_get(value, rest) if rest else value
        except KeyError:
            wanted = None
        if _plain(mine) != _plain(wanted):
            raise ConfigError(
                f"pipeline config key '{stage}.{key}': {mine!r} disagrees with the link {link.source} -> "
                f"{link.target} ({link.why}), which sets {wanted!r}; set it at the source"
                f"{' (the top-level ' + _top_level(link.source) + ')' if _top_level(link.source) else ''}"
                " or leave it out"
            )


def _top_level(source: str) -> str:
    name = source.removeprefix("run.").split("/")[0] if source.startswith("run.") else ""
    return RUN_VALUES.get(name, "").split(",")[0] if name and name not in ("dir", "loggers", "evaluation_seed") else ""


def _plain(value: Any) -> Any:
    return OmegaConf.to_container(value, resolve=True) if isinstance(value, DictConfig | ListConfig) else value


def run_value(run: Mapping[str, Any], name: str, stage: str) -> Any:
    """A run-level value for ``stage``: ``run``'s (the pipeline's), or the stage's own folder and loggers."""
    workdir = run["workdir"]
    if name == "dir":
        return f"{workdir}/{stage}"
    if name == "loggers":
        return [
            {"class_path": LOGGERS[0], "init_args": {"project": "propel", "name": f"pipeline-{stage}",
                                                     "save_dir": f"{workdir}/{stage}"}},
            {"class_path": LOGGERS[1], "init_args": {"save_dir": f"{workdir}/{stage}", "name": "csv"}},
        ]  # fmt: skip
    return copy.deepcopy(run[name])


def resolve(link: Link, stage: str, run: Mapping[str, Any], configs: Mapping[str, Mapping]) -> Any:
    """The link's value for ``stage``; KeyError when its source stage holds no such key."""
    if link.source.startswith("="):
        return yaml.safe_load(link.source[1:])
    if link.source.startswith("run."):
        name, _, path = link.source.removeprefix("run.").partition("/")
        value = run_value(run, name, stage)
        return f"{value}/{path}" if path else value
    source_stage, _, key = link.source.partition(".")
    return read(configs[source_stage], key)


def apply(
    stage: str,
    node: DictConfig,
    run: Mapping[str, Any],
    configs: Mapping[str, Mapping],
    given: Mapping[str, Any],
    stages: list[str],
) -> list[dict]:
    """Set every link of ``stage`` in its composed ``node``: ``run`` holds the run-level values, ``configs``
    the stages composed before it, ``given`` the keys its pipeline section set (refused where they disagree),
    ``stages`` the stages this run runs (``Link.required``). Returns the rows applied (source, target, value, why)."""
    rows = []
    for link in stage_links(stage):
        try:
            value = resolve(link, stage, run, configs)
        except KeyError:  # the source stage has no such entry (no ProbeReward gate): nothing to keep in step
            continue
        if value is None and link.null_keeps:
            continue
        key = link.key
        if link.keep:
            own = _plain(OmegaConf.select(node, key)) or {}
            value = {**value, **{k: own[k] for k in link.keep if k in own}}
        _refuse_disagreement(link, stage, value, given)
        if not _write(node, key, value):
            needed = link.required == ALWAYS or any(s in stages for s in link.required)
            if needed:
                cls = _ENTRY.match(key)["cls"]
                raise ConfigError(
                    f"pipeline config key '{stage}.config': the {stage} templates have no {cls} "
                    f"(the link {link.source} -> {link.target}: {link.why})"
                )
            continue
        rows.append({"source": link.source, "target": f"{stage}.{key}", "value": value, "why": link.why})
    return rows


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def table(links: tuple[Link, ...] = LINKS) -> str:
    """The links as a markdown table, one row per source and reason with every target it fans out to: what
    ``docs/architecture.md`` shows."""
    rows: dict[tuple, list[str]] = {}
    for link in links:
        note = "; keeps its own " + ", ".join(link.keep) if link.keep else ""
        note += "; a null source leaves the target's default" if link.null_keeps else ""
        if link.required == ():
            note += " (where the templates have it)"
        elif link.required != ALWAYS:
            note += f" (needed when {' or '.join(link.required)} runs)"
        rows.setdefault((link.source, link.why + note), []).append(f"`{link.target}`")
    lines = ["| source | targets | why |", "|---|---|---|"]
    lines += [f"| `{source}` | {', '.join(targets)} | {_cell(why)} |" for (source, why), targets in rows.items()]
    return "\n".join(lines) + "\n"
