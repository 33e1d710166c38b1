"""Which checkpoint ``propel fit`` continues from, and which changed settings a resume takes.

Resuming is the default: when the run folder (the ``dirpath`` of the config's ``ModelCheckpoint`` with
``save_last``) holds ``last.ckpt`` and no ``--ckpt_path`` is given (or ``--ckpt_path last``), the run continues from
it; ``--ckpt_path none`` (or another ``trainer.default_root_dir``) starts over. The choice is said once, at the
start. A checkpoint already at ``trainer.max_steps`` is a finished run: nothing runs and nothing is overwritten.

Every resume compares this run's config with the one the checkpoint carries (``CONFIG_KEY``, which the CLI puts in
every checkpoint; for a checkpoint written without the CLI, its module's hyperparameters and LoRA settings). Lightning
would instead put the checkpoint's hyperparameters over the config (``--ckpt_path FILE``) or keep the config but
restore the optimizer's old settings (``--ckpt_path last``), in both cases without a word. Here each changed key is
either refused with one line naming it (``REFUSED``: the change cannot take effect, or would make the restored state
mean something else), or applied and named. A resumed run then holds, and writes into its checkpoints, the values in
use: this run's config and hyperparameters, and the optimizer settings, which the policy sets back to this run's
after the checkpoint's optimizer state is restored (``LoRAPolicyModule.on_train_start``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from propel.cli.errors import RENAMED
from propel.errors import ConfigError

CONFIG_KEY = "propel_config"
"""The checkpoint entry holding the run's config (the YAML ``config.yaml`` holds), written by the CLI."""
START_OVER = "none"
"""``--ckpt_path none``: start at step 0 even where the run folder holds a ``last.ckpt``."""
PASSED_THROUGH = ("hpc", "best", "registry")
"""``--ckpt_path`` keywords left to Lightning as they are."""
IGNORED = ("ckpt_path", "config")
"""Config keys that differ between a run and its resume by design."""
REFUSED = {
    "model.class_path": "the checkpoint holds another trainer's state",
    "model.init_args.model": "the adapter was trained on the checkpoint's base model",
    "model.init_args.lora": "the restored adapter keeps the checkpoint's rank, scale and target modules",
    "model.init_args.optimizer.class_path": "the restored optimizer state is the checkpoint's optimizer's",
    "data.class_path": "the restored stream position belongs to the checkpoint's datamodule",
    "seed_everything": "the resumed run continues the checkpoint's random state, so another seed changes nothing",
}
"""Keys (and the keys under them) a resume refuses to change, with why. Everything else takes effect: the length of
the run, logging, callbacks, the rollout settings (``group_size``, sampling, the engine), the loss, the rewards, the
data's contents, and the optimizer's settings (``OPTIMIZER``)."""
OPTIMIZER = ("model.init_args.lr", "model.init_args.weight_decay", "model.init_args.optimizer.init_args")
"""Keys whose new value the policy sets on the restored optimizer (whose state would otherwise keep the old one)."""
_UNSET = "(unset)"


@dataclass
class Plan:
    """What ``propel fit`` does about its checkpoint."""

    ckpt_path: str | None
    """The checkpoint to continue from (None: start at step 0)."""
    finished: bool = False
    """The checkpoint is already at ``max_steps``: nothing to run."""
    lines: list[str] = field(default_factory=list)
    """What to say at the start, once."""


def flat_keys(node, prefix: str = "") -> dict:
    """``{"init_args.lr": 1e-4, "callbacks.0.init_args.dirpath": ...}`` from nested Namespaces, dicts and lists of
    them (keys starting with ``_`` are jsonargparse's own and skipped)."""
    from jsonargparse import Namespace

    if isinstance(node, Namespace):
        node = vars(node)
    if isinstance(node, dict):
        items = [(k, v) for k, v in node.items() if not str(k).startswith("_")]
    elif isinstance(node, (list, tuple)) and any(isinstance(v, (dict, list, tuple, Namespace)) for v in node):
        items = list(enumerate(node))
    else:
        return {prefix.rstrip("."): list(node) if isinstance(node, tuple) else node} if prefix else {}
    out = {}
    for key, value in items:
        out.update(flat_keys(value, f"{prefix}{key}."))
    return out


def last_checkpoint(config: dict) -> Path | None:
    """The run folder's ``last.ckpt`` (there or not) of a fit ``config``: the first ``ModelCheckpoint`` (or subclass)
    under ``trainer.callbacks`` with a ``dirpath`` and ``save_last``; None without one."""
    import importlib

    from lightning.pytorch.callbacks import ModelCheckpoint

    callbacks = (config.get("trainer") or {}).get("callbacks") or []
    for spec in [callbacks] if isinstance(callbacks, dict) else callbacks:
        if not isinstance(spec, dict) or not isinstance(spec.get("class_path"), str):
            continue
        module, _, name = spec["class_path"].rpartition(".")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError):
            continue
        args = spec.get("init_args") or {}
        if isinstance(cls, type) and issubclass(cls, ModelCheckpoint) and args.get("dirpath") and args.get("save_last"):
            return Path(args["dirpath"]).expanduser() / f"{cls.CHECKPOINT_NAME_LAST}{cls.FILE_EXTENSION}"
    return None


def read_checkpoint(path: Path) -> dict:
    """A checkpoint's contents (memory-mapped: only what is read is loaded); a one-line ``ConfigError`` if not."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception as err:  # noqa: BLE001 (any failure to read is the same answer)
        raise ConfigError(
            f"cannot read the checkpoint {path} ({type(err).__name__}: {err}); --ckpt_path none starts over"
        ) from None


def saved_settings(checkpoint: dict) -> tuple[dict, bool]:
    """The settings a checkpoint was written with, and whether they are the whole config (else only the module's
    hyperparameters and LoRA settings, for a checkpoint written without the CLI)."""
    text = checkpoint.get(CONFIG_KEY)
    if isinstance(text, str):
        return yaml.safe_load(text) or {}, True
    init_args = dict(checkpoint.get("hyper_parameters") or {})
    if isinstance(checkpoint.get("lora_spec"), dict):
        init_args["lora"] = checkpoint["lora_spec"]
    return {"model": {"init_args": init_args}}, False


def renamed(flat: dict) -> dict:
    """``flat`` (``flat_keys``) with keys a checkpoint wrote under a name since renamed (``RENAMED``:
    ``model.init_args.episodes_per_context``) under the current one (``model.init_args.group_size``); where it also
    holds the current name, that value is kept (it was the one in use)."""
    out = {}
    for key, value in flat.items():
        parent, _, name = key.rpartition(".")
        if name in RENAMED:
            new = f"{parent}.{RENAMED[name]}" if parent else RENAMED[name]
            if new not in flat:
                out[new] = value
        else:
            out[key] = value
    return out


def _under(key: str, prefix: str) -> bool:
    return key == prefix or key.startswith(prefix + ".")


def _show(value: Any) -> str:
    text = value if value == _UNSET else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def changes(saved: dict, now: dict, whole: bool = True) -> tuple[list[str], list[str]]:
    """The keys that differ between ``saved`` and ``now``: ``(refused, applied)``, one ``"key: old -> new (why)"``
    each. ``whole``: ``saved`` is a whole config (else only its own keys are compared)."""
    before, after = renamed(flat_keys(saved)), flat_keys(now)
    keys = sorted(set(before) | set(after)) if whole else sorted(before)
    # An entry whose class changed (a logger swapped for another, one added or removed) is one change: its class,
    # with its own settings, not every init_arg of both classes
    swapped = {
        key.removesuffix(".class_path")
        for key in keys
        if key.endswith(".class_path") and before.get(key, _UNSET) != after.get(key, _UNSET)
    }
    refused, applied = [], []
    for key in keys:
        old, new = before.get(key, _UNSET), after.get(key, _UNSET)
        if old == new or any(_under(key, k) for k in IGNORED):
            continue
        if key == "seed_everything" and isinstance(new, bool):  # a random seed (or none): nothing to compare
            continue
        change = f"{key}: {_show(old)} -> {_show(new)}"
        reason = next((why for prefix, why in REFUSED.items() if _under(key, prefix)), None)
        # the outermost swapped entry (a set's order differs between processes)
        entry = min((p for p in swapped if key.startswith(p + ".")), key=len, default=None)
        if entry is not None and reason is None:
            if key != f"{entry}.class_path":
                continue  # folded into its entry's class change
            change = f"{entry}: {_show(old)} -> {_show(new)}, with its own settings"
        if reason is not None:
            refused.append(f"{change} ({reason})")
        elif any(_under(key, k) for k in OPTIMIZER):
            applied.append(f"{change} (set on the restored optimizer)")
        else:
            applied.append(change)
    return refused, applied


def shown(path: Path | str) -> str:
    """``path`` relative to the working folder when it is under it (as a user typed it), else absolute."""
    text = os.path.relpath(path)
    return str(path) if text.startswith("..") else text


def plan(config: dict, ckpt_path: str | None) -> Plan:
    """What ``propel fit`` with ``config`` (the composed config as a plain dict) and ``--ckpt_path`` does: continue
    from which checkpoint, start over, or nothing (finished). Raises ``ConfigError`` for a checkpoint that is not
    there and for a change a resume refuses."""
    last = last_checkpoint(config)
    given = None if ckpt_path is None else str(ckpt_path)
    if given is not None and (given in PASSED_THROUGH or "://" in given):
        return Plan(given)
    if given is not None and given.lower() == START_OVER:
        if last is None or not last.is_file():
            return Plan(None)
        step = read_checkpoint(last).get("global_step")
        return Plan(None, lines=[f"propel: starting over (--ckpt_path none): {shown(last)} (step {step}) is replaced"])
    if given is None or given == "last":
        if last is None and given == "last":
            raise ConfigError(
                "--ckpt_path last: no ModelCheckpoint with a dirpath and save_last: true in trainer.callbacks, so "
                "there is no last.ckpt to resume from"
            )
        if last is None:
            return Plan(None)
        if not last.is_file():
            where = f"no {last.name} in {shown(last.parent)} yet (rerunning this command resumes from it)"
            return Plan(None, lines=[f"propel: new run at step 0: {where}"])
        path = last
    else:
        path = Path(given).expanduser()
        if not path.is_file():
            raise ConfigError(f"--ckpt_path {given}: no such checkpoint file (--ckpt_path none starts over)")
    checkpoint = read_checkpoint(path)
    step = int(checkpoint.get("global_step", 0))
    max_steps = (config.get("trainer") or {}).get("max_steps")
    bounded = isinstance(max_steps, int) and max_steps >= 0
    if bounded and step >= max_steps:
        done = f"{shown(path)} is at step {step} and trainer.max_steps is {max_steps}: the run is finished"
        hint = "nothing to do (--trainer.max_steps=N trains on; --ckpt_path none starts over)"
        return Plan(None, finished=True, lines=[f"propel: {done}, {hint}"])
    saved, whole = saved_settings(checkpoint)
    refused, applied = changes(saved, config, whole)
    if refused:
        raise ConfigError(
            f"cannot resume {shown(path)} with {'; '.join(refused)}: set it back, or start over with "
            "--ckpt_path none (or another trainer.default_root_dir)"
        )
    of = f" of {max_steps}" if bounded else ""
    lines = [f"propel: resuming from {shown(path)} at step {step}{of}; --ckpt_path none starts over"]
    if applied:
        lines.append(f"propel: changed since the checkpoint, applied: {'; '.join(applied)}")
    return Plan(str(path), lines=lines)
