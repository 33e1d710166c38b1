"""What a job reads that an earlier job writes, checked before anything heavy loads: a missing one ends in one line
naming the command that writes it. ``propel fit -c grpo/base -c math/grpo`` in an empty folder says "run `propel
predict -c math/label`, then `propel probe -c probe/sweep` first" instead of a traceback from the reward's setup.

The writers are found in the shipped configs (a probe job's ``output_dir``, a ``PoolWriter``'s ``output_dir``), so a
new shipped job is covered without a table to keep in step; a path no shipped config writes gets a general hint.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path

from propel.cli.static_keys import SECTIONS, class_nodes
from propel.errors import PropelError

INPUTS = {
    ("ProbeReward", "artifact"): "the probe artifact",
    ("EvaluationModule", "adapter"): "the trained adapter",
    ("ActivationDataModule", "features_path"): "the cached features",
    ("ActivationDataModule", "labels_path"): "the labeled pool",
}
"""Init arguments that name an earlier job's output: ``(class name, argument)`` -> what it is."""
PROBE_INPUTS = {"pool": "the labeled pool"}
"""The probe job's (``propel probe``) keys that name an earlier job's output."""
GENERAL = {
    "the probe artifact": "run `propel probe -c <probe config>` first",
    "the trained adapter": "train one first (`propel fit -c grpo/base -c math/grpo` writes runs/grpo/adapters/step-N)",
    "the cached features": "run `propel probe -c probe/sweep` first (it caches features under runs/probe/cache)",
    "the labeled pool": "run `propel predict -c <label config>` first",
}
"""The hint for an input that no shipped config writes at that path."""


class MissingInput(PropelError):
    """A job's input that an earlier job writes does not exist."""


def _paths(value: object) -> Iterator[str]:
    """The paths in a value (a string or a list of them); interpolations are the parser's to resolve."""
    for item in value if isinstance(value, list) else [value]:
        if isinstance(item, str) and item and "${" not in item:
            yield item


def lightning_inputs(config: Mapping) -> Iterator[tuple[str, str, str]]:
    """``(key, path, what)`` of each earlier job's output that a Lightning config's classes read."""
    for section in SECTIONS:
        for key, class_path, init_args in class_nodes(config.get(section), section):
            for arg, value in init_args.items():
                what = INPUTS.get((class_path.rpartition(".")[2], arg))
                for path in _paths(value) if what else ():
                    yield f"{key}.init_args.{arg}", path, what


def probe_inputs(config: Mapping) -> Iterator[tuple[str, str, str]]:
    """``(key, path, what)`` of each earlier job's output that a probe job config reads."""
    for key, what in PROBE_INPUTS.items():
        for path in _paths(config.get(key)):
            yield key, path, what


@cache
def _writers() -> dict[Path, tuple[str, tuple]]:
    """Each output of the shipped configs -> the command that writes it and that config's own inputs."""
    import yaml

    from propel.paths import shipped_configs

    root, out = shipped_configs(), {}
    for file in sorted(root.rglob("*.yaml")):
        data = yaml.safe_load(file.read_text()) or {}
        name = file.relative_to(root).with_suffix("").as_posix()
        if isinstance(data.get("pool"), str) and isinstance(data.get("output_dir"), str):  # a probe job
            needs = tuple(probe_inputs(data))
            out[Path(data["output_dir"], "artifact")] = (f"propel probe -c {name}", needs)
            out[Path(data["output_dir"], "cache")] = (f"propel probe -c {name}", needs)
        trainer = data.get("trainer") if isinstance(data.get("trainer"), dict) else {}
        for callback in trainer.get("callbacks") or []:
            args = callback.get("init_args") if isinstance(callback, dict) else None
            if str(callback.get("class_path", "")).endswith("PoolWriter") and isinstance(args, dict):
                out.setdefault(Path(args["output_dir"]), (f"propel predict -c {name}", ()))
    return out


def _writer(path: str) -> tuple[str, tuple] | None:
    wanted = Path(os.path.normpath(path))
    for written, found in _writers().items():
        if wanted == written or written in wanted.parents:
            return found
    return None


def _steps(path: str, what: str, depth: int = 0) -> list[str]:
    """The commands to run, in order, for ``path`` to exist (the writer's own missing inputs first)."""
    found = _writer(path) if depth < 4 else None
    if found is None:
        return [GENERAL[what]]
    command, needs = found
    earlier = [step for _, p, w in needs if not Path(p).exists() for step in _steps(p, w, depth + 1)]
    return [*earlier, f"`{command}`"]


def check(inputs: Iterator[tuple[str, str, str]]) -> None:
    """Refuse (one line) the first input that does not exist, naming the commands that write it."""
    for key, path, what in inputs:
        if Path(path).exists():
            continue
        steps = _steps(path, what)
        todo = steps[0] if len(steps) == 1 and not steps[0].startswith("`") else f"run {', then '.join(steps)} first"
        raise MissingInput(f"{path} does not exist ({key}: {what}): {todo}")
