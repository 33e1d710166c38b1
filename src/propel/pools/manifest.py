"""The settings manifest of a pool folder: what its rows were made with, so a resume never mixes two settings.

Labeling and evaluation resume by skipping the ids already in their folder. Without a record of the settings a
rerun with another adapter, solver or seed would keep the old rows and label them with the new settings. The first
run writes ``settings.json``; a later run into the same folder must match it or stops with one line naming what
differs. Only settings that change the rows count (models and adapter contents, domain, solver, seeds, sampling,
band); throughput settings (batch size, concurrency, progress, device placement) may change between runs, and so
may ``n_tasks`` (a rerun with more tasks extends the pool).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any

from propel.durable import write_json
from propel.errors import ConfigError
from propel.pools.io import pool_parts
from propel.renamed import with_todays_names

MANIFEST = "settings.json"
MODULE_KEYS = (
    "generator",
    "adapter",
    "oracle",
    "engine",
    "max_new_tokens",
    "temperature",
    "top_p",
    "dtype",
    "seed",
)
"""The labeling/evaluation module's hyperparameters that change its rows (``engine_kwargs`` hold server
addresses and memory settings: left out)."""
THROUGHPUT = frozenset({"batch_size", "concurrency", "retries", "progress", "num_workers", "verbose", "workers"})
"""Attribute names that never change a row, left out when an object (domain, agent solver) is described."""


def fingerprint(path: str | Path | None) -> str | None:
    """SHA-256 of a file, or of a folder's files (relative names and contents): an adapter retrained in place at
    the same path is a different adapter. None for no path; the path itself when it does not exist (yet)."""
    if path is None:
        return None
    root = Path(path)
    if not root.exists():
        return str(path)
    files = [root] if root.is_file() else sorted(p for p in root.rglob("*") if p.is_file())
    digest = hashlib.sha256()
    for file in files:
        digest.update(str(file.relative_to(root) if file != root else file.name).encode() + b"\0")
        with file.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()


def describe(obj: Any) -> Any:
    """A JSON-able description of a setting: primitives as they are, dataclasses as their fields, other objects
    as their class and public primitive attributes (throughput ones left out)."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (list, tuple)):
        return [describe(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): describe(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: describe(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    attrs = {
        k: describe(v)
        for k, v in sorted(vars(obj).items())
        if not k.startswith("_") and k not in THROUGHPUT and isinstance(v, (bool, int, float, str, tuple, list))
    }
    return {"class": f"{type(obj).__module__}.{type(obj).__qualname__}", **attrs}


def run_settings(module: Any, data_seed: int | None = None) -> dict:
    """The settings behind a labeling or evaluation module's rows: its result-changing hyperparameters (the
    adapter also by content), its domain and solver (and agent solver), and the datamodule's context seed."""
    hparams = dict(getattr(module, "hparams", {}) or {})
    settings = {k: describe(hparams[k]) for k in MODULE_KEYS if k in hparams}
    if hparams.get("adapter") is not None:
        settings["adapter_sha256"] = fingerprint(hparams["adapter"])
    for name in ("domain", "solver", "solver_agent"):
        if getattr(module, name, None) is not None:
            settings[name] = describe(getattr(module, name))
    if data_seed is not None:
        settings["context_seed"] = data_seed
    return json.loads(json.dumps(settings, sort_keys=True, default=str))


def _flat(node: Any, prefix: str = "") -> dict:
    if isinstance(node, dict):
        out: dict = {}
        for key, value in node.items():
            out.update(_flat(value, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): node}


def check_manifest(folder: str | Path, settings: dict, what: str = "output folder") -> bool:
    """Refuse ``folder`` when its manifest records other settings (one-line ``ConfigError`` naming each); write the
    manifest when there is none. Returns True when the manifest was written now.

    A folder holding rows but no manifest (made before manifests existed) is adopted: nothing can be compared.
    """
    folder = Path(folder)
    path = folder / MANIFEST
    settings = json.loads(json.dumps(settings, sort_keys=True, default=str))
    if path.exists():
        old, new = _flat(with_todays_names(json.loads(path.read_text()))), _flat(settings)  # an older propel's names
        keys = sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))
        changed = [f"{k}: {old.get(k)!r} -> {new.get(k)!r}" for k in keys]
        if changed:
            shown = "; ".join(changed[:4]) + (f"; and {len(changed) - 4} more" if len(changed) > 4 else "")
            raise ConfigError(
                f"{what} {folder} holds rows made with other settings ({shown}): resuming would mix the two. "
                f"Use another folder, delete this one, or rerun with its settings ({path})"
            )
        return False
    folder.mkdir(parents=True, exist_ok=True)
    if pool_parts(folder):
        from warnings import warn

        warn(f"{folder} has rows but no {MANIFEST} (an older run): its settings cannot be checked", stacklevel=2)
    write_json(path, settings, indent=1, sort_keys=True)
    return True
