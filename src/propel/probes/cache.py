"""On-disk activation cache: one folder per (reference model, layers, poolings, data hash), written in shards.

The folder key covers everything that changes the numbers: the model's name, weights fingerprint, dtype and
tokenizer (``propel.probes.fingerprint``), the extraction settings (left truncation included) and the texts; row ids
only label rows, so a finished cache asked for the same texts under other ids relabels its rows.

Each chunk of rows becomes one ``shard_NNNNN.pt`` (written to a temp name, then renamed), so a killed extraction
resumes from the last finished chunk; ``meta.json`` records what the folder holds and whether it is complete.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor

from propel.cli import stops
from propel.durable import write_json, write_with
from propel.probes.extraction import ActivationExtractor, feature_key
from propel.probes.fingerprint import reference_fingerprint

META = "meta.json"
TRUNCATION = "left"
"""How texts over ``max_length`` are cut (see ``propel.probes.extraction``); part of the key."""


def data_hash(items: Sequence) -> str:
    """Content hash of the texts or trajectories to extract (order matters)."""
    return hashlib.sha256(json.dumps(list(items), ensure_ascii=False).encode()).hexdigest()[:16]


def cache_key(
    model_id: str,
    layers,
    poolings,
    trajectory_pooling: str,
    max_length: int,
    items_hash: str,
    reference: dict | None = None,
) -> str:
    """Folder name for one extraction setting; readable prefix + hash of everything that changes the numbers.

    ``reference`` is the model's ``reference_fingerprint`` (weights, dtype, width, tokenizer).
    """
    parts = [model_id, sorted(layers), sorted(poolings), trajectory_pooling, max_length, items_hash]
    if reference is not None:
        parts += [reference, TRUNCATION]
    spec = json.dumps(parts, sort_keys=True)
    slug = "".join(c if c.isalnum() or c in "-_." else "-" for c in Path(model_id).name)[:40]
    return f"{slug}-{hashlib.sha256(spec.encode()).hexdigest()[:16]}"


def shard_path(root: Path, index: int) -> Path:
    """Where chunk ``index`` of a cache folder is stored."""
    return root / f"shard_{index:05d}.pt"


class ActivationCache:
    """Read side of a cache folder: ids, feature keys and ``features(layer, pooling) -> [N, D]``."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        meta_path = self.root / META
        if not meta_path.exists():
            raise FileNotFoundError(f"features_path: {self.root} is not an activation cache (no {META})")
        self.meta = json.loads(meta_path.read_text())

    @property
    def complete(self) -> bool:
        return bool(self.meta.get("complete"))

    @property
    def ids(self) -> list[str]:
        return list(self.meta["ids"])

    @property
    def keys(self) -> list[str]:
        return list(self.meta["keys"])

    def shard_paths(self) -> list[Path]:
        return [shard_path(self.root, i) for i in range(self.meta["num_chunks"])]

    def load(self, key: str) -> Tensor:
        """One feature block [N, D] (fp32), concatenated over shards."""
        if not self.complete:
            raise RuntimeError(f"activation cache {self.root} is incomplete; rerun the extraction to finish it")
        if key not in self.keys:
            raise KeyError(f"feature {key!r} not in cache {self.root}; it holds {', '.join(self.keys)}")
        parts = [torch.load(p, map_location="cpu", weights_only=True, mmap=True)[key] for p in self.shard_paths()]
        return torch.cat(parts).float()

    def features(self, layer: int, pooling: str) -> Tensor:
        return self.load(feature_key(layer, pooling))


def _write_atomic(obj, path: Path) -> None:
    write_with(path, lambda tmp: torch.save(obj, tmp))


def _write_meta(root: Path, meta: dict) -> None:
    write_json(root / META, meta, indent=None)


def extract_to_cache(
    extractor: ActivationExtractor,
    items: Sequence,
    *,
    model_id: str,
    cache_root: str | Path,
    ids: Sequence[str] | None = None,
    chunk_size: int = 256,
    progress: bool = True,
) -> ActivationCache:
    """Extract ``items`` (texts or trajectories) into ``cache_root/<key>``; finished chunks are never redone.

    Args:
        extractor: layers, poolings and batching to use.
        items: texts or per-turn trajectories, one per row.
        model_id: reference model name or path (part of the cache key and the probe artifact).
        cache_root: folder that holds cache folders.
        ids: row ids (default ``"0".."N-1"``), stored for joining with labels.
        chunk_size: rows per shard (the unit of resumption).
        progress: show a rich progress bar.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    items = list(items)
    ids = [str(i) for i in range(len(items))] if ids is None else [str(i) for i in ids]
    if len(ids) != len(items):
        raise ValueError(f"ids: got {len(ids)} ids for {len(items)} items")
    reference = reference_fingerprint(extractor.model, extractor.tokenizer)
    key = cache_key(
        model_id,
        extractor.layers,
        extractor.poolings,
        extractor.trajectory_pooling,
        extractor.max_length,
        data_hash(items),
        reference,
    )
    root = Path(cache_root) / key
    root.mkdir(parents=True, exist_ok=True)
    num_chunks = (len(items) + chunk_size - 1) // chunk_size
    meta = _extraction_meta(extractor, model_id, items, ids, reference, chunk_size, num_chunks)
    if _finished(root, ids, chunk_size):
        return ActivationCache(root)
    _write_meta(root, meta)
    try:
        _write_shards(extractor, items, root, f"extracting {key}", chunk_size, num_chunks, progress)
    except KeyboardInterrupt:  # Ctrl-C or a stop signal: the command's last line says what is on disk
        held = sum(shard_path(root, c).exists() for c in range(num_chunks))
        stops.note(f"the activation cache holds {held} of {num_chunks} shards of {chunk_size} rows in {root}", held > 0)
        raise
    meta["complete"] = True
    _write_meta(root, meta)
    return ActivationCache(root)


def _extraction_meta(extractor, model_id, items, ids, reference, chunk_size, num_chunks) -> dict:
    """``meta.json`` of an unfinished extraction: what the folder holds and how it is sharded."""
    return {
        "model_id": model_id,
        "layers": extractor.layers,
        "poolings": list(extractor.poolings),
        "trajectory_pooling": extractor.trajectory_pooling,
        "max_length": extractor.max_length,
        "truncation": TRUNCATION,
        "reference": reference,
        "data_hash": data_hash(items),
        "chunk_size": chunk_size,
        "num_chunks": num_chunks,
        "ids": ids,
        "keys": extractor.keys,
        "complete": False,
    }


def _finished(root: Path, ids: list[str], chunk_size: int) -> bool:
    """Whether ``root`` already holds the finished extraction (relabelled to ``ids`` when its own differ); an
    unfinished one made with another chunk size loses its shards, which would not line up."""
    if not (root / META).exists():
        return False
    old = json.loads((root / META).read_text())
    if old.get("complete"):
        if old.get("ids") != ids:  # same texts (the key says so), other row ids: relabel, never serve stale ids
            _write_meta(root, {**old, "ids": ids})
        return True
    if old.get("chunk_size") != chunk_size:
        for stale in root.glob("shard_*.pt"):
            stale.unlink()
    return False


def _item_size(item) -> int:
    """Progress units of one row: a text is one, a trajectory its turns (what ``extractor.encode`` reports)."""
    return 1 if isinstance(item, str) else len(item)


def _write_shards(extractor, items: list, root: Path, title: str, chunk_size: int, num_chunks: int, progress: bool):
    """Encode and save every chunk whose shard is missing (a resumed run skips the finished ones)."""
    from rich.progress import Progress

    with Progress(disable=not progress, transient=True) as bar:
        task = bar.add_task(title, total=sum(_item_size(it) for it in items))
        for c in range(num_chunks):
            chunk = items[c * chunk_size : (c + 1) * chunk_size]
            shard = shard_path(root, c)
            if shard.exists():
                bar.advance(task, sum(_item_size(it) for it in chunk))
                continue
            feats = extractor.encode(chunk, on_batch=lambda n: bar.advance(task, n))
            _write_atomic({k: v.contiguous() for k, v in feats.items()}, shard)


def save_features_file(path: str | Path, ids: Sequence[str], features: dict[str, Tensor], **info) -> Path:
    """Write a single-file feature set ``{"ids", "features": {key: [N, D]}, "info"}`` (what the DataModule reads)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_atomic({"ids": [str(i) for i in ids], "features": dict(features), "info": info}, path)
    return path


def load_features(path: str | Path, key: str | None = None) -> tuple[list[str], Tensor, dict]:
    """``(ids, features [N, D], info)`` from a cache folder or a features file; ``key`` picks the block."""
    path = Path(path)
    if path.is_dir():
        cache = ActivationCache(path)
        if key is None:
            if len(cache.keys) != 1:
                raise ValueError(f"layer/pooling: cache {path} holds {cache.keys}; set layer and pooling to pick one")
            key = cache.keys[0]
        info = {k: cache.meta[k] for k in ("model_id", "trajectory_pooling", "max_length")}
        if "reference" in cache.meta:
            info["reference"] = cache.meta["reference"]
        return cache.ids, cache.load(key), {**info, "key": key}
    if not path.exists():
        raise FileNotFoundError(f"features_path: {path} does not exist (expected a cache folder or a .pt file)")
    blob = torch.load(path, map_location="cpu", weights_only=True)
    feats = blob["features"]
    if isinstance(feats, dict):
        if key is None:
            if len(feats) != 1:
                raise ValueError(f"layer/pooling: {path} holds {sorted(feats)}; set layer and pooling to pick one")
            key = next(iter(feats))
        if key not in feats:
            raise KeyError(f"feature {key!r} not in {path}; it holds {', '.join(sorted(feats))}")
        feats = feats[key]
    return [str(i) for i in blob["ids"]], feats.float(), {**blob.get("info", {}), "key": key}
