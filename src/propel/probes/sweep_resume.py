"""Resuming a probe sweep: what a finished run's numbers depend on (``resume_fingerprint``), and the finished runs
of ``runs.csv`` a rerun keeps (``resume_records``): all of them when ``runs_meta.json`` shows the same features,
labels, RVP sample and training recipe, none otherwise (the old file set aside as ``runs.stale.csv``, with a warning
naming what changed).
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from propel.probes.data import LabeledRows
from propel.probes.sweep_spec import RUN_COLUMNS, RVPSample, SweepSpec

RUNS_META = "runs_meta.json"
SELECTION_ONLY = ("archs", "balances", "seeds", "logistic_baseline", "num_threads", "max_ece", "tie_tolerance")
"""``SweepSpec`` fields that add runs or change selection but never change a finished run's numbers."""


def _hash(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, Tensor):
            part = part.detach().cpu().contiguous()
            digest.update(str((tuple(part.shape), str(part.dtype))).encode())
            digest.update(part.view(torch.uint8).numpy().tobytes() if part.numel() else b"")
        elif isinstance(part, np.ndarray):
            digest.update(np.ascontiguousarray(part).tobytes() if part.dtype != object else str(list(part)).encode())
        else:
            digest.update(json.dumps(part, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def resume_fingerprint(
    features: Mapping[str, Tensor],
    rows: LabeledRows,
    config: SweepSpec,
    rvp_sample: RVPSample | None = None,
    cache_key: str | None = None,
) -> dict[str, str]:
    """What a finished run's numbers depend on, as ``{part: hash}``: features (the activation cache key when given,
    else the tensors), labels (ids, labels, solve counts, groups), the training recipe and the RVP sample."""
    recipe = {k: v for k, v in asdict(config).items() if k not in SELECTION_ONLY}
    feats = cache_key if cache_key is not None else _hash(*(x for k in sorted(features) for x in (k, features[k])))
    groups = None if rows.groups is None else [str(g) for g in rows.groups]
    rvp_part = "none"
    if rvp_sample is not None:
        s = rvp_sample
        blocks = [x for k in sorted(s.features) for x in (k, s.features[k])]
        gate = s.gate
        rvp_part = _hash(gate.mode, gate.floor, list(gate.soft_clip), s.group_size, s.valid.float(), *blocks)
    return {
        "features": feats,
        "labels": _hash(rows.ids, rows.rows.astype(np.int64), rows.labels, rows.solve_counts, groups),
        "recipe": _hash(recipe),
        "rvp": rvp_part,
    }


def resume_records(runs_path: Path, fingerprint: dict[str, str]) -> list[dict]:
    """Finished runs of ``runs_path`` when they match ``fingerprint`` and the fixed header; else set them aside."""
    import pandas as pd

    meta_path = runs_path.parent / RUNS_META
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    old = meta.get("fingerprint", {})
    changed = [part for part in fingerprint if old.get(part) != fingerprint[part]]
    columns = list(pd.read_csv(runs_path, nrows=0).columns)
    if columns != RUN_COLUMNS:
        changed.append("runs.csv header")
    if not changed:
        return pd.read_csv(runs_path).to_dict("records")
    warnings.warn(
        f"probe sweep: {runs_path} was made with other {', '.join(changed)}; starting over "
        f"(old runs kept as {runs_path.with_suffix('.stale.csv').name})",
        stacklevel=3,
    )
    runs_path.replace(runs_path.with_suffix(".stale.csv"))
    return []
