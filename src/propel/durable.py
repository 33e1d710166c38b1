"""Files that survive a kill or a power loss whole or not at all: write under a temporary name, flush the bytes to
the disk, rename, then flush the folder entry (the rename itself). Every writer of resumable outputs uses this:
summaries that mark a stage done, settings manifests, feature caches, downloaded archives, converted models."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def fsync(path: str | Path) -> None:
    """Flush a file's (or a folder's entries') data to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def publish(tmp: str | Path, final: str | Path) -> Path:
    """Give the finished file ``tmp`` its name ``final`` durably: its bytes reach the disk before the name says it
    is finished, and the rename is flushed too."""
    tmp, final = Path(tmp), Path(final)
    fsync(tmp)
    os.replace(tmp, final)
    fsync(final.parent)
    return final


def write_with(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Write ``path`` through ``write(tmp_path)`` (``torch.save``, a download) and publish it; a failed write leaves
    neither a half file under the final name nor the temporary one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        write(Path(tmp))
        return publish(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(path: str | Path, text: str) -> Path:
    return write_with(path, lambda tmp: tmp.write_text(text))


def write_json(path: str | Path, data, indent: int | None = 2, sort_keys: bool = False) -> Path:
    """JSON, atomically (a crash never leaves half a summary that would mark a stage done)."""
    return write_text(path, json.dumps(data, indent=indent, sort_keys=sort_keys, default=str))


def publish_dir(build: Callable[[Path], None], final: str | Path, keep_existing: bool = False) -> Path:
    """Build a folder with ``build(tmp_dir)`` beside ``final`` and rename it into place (the folder appears whole or
    not at all). ``keep_existing``: when ``final`` appeared meanwhile (another process won the race), keep it."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".tmp", dir=final.parent))
    try:
        build(tmp)
        for parent, _, files in os.walk(tmp):
            for name in files:
                fsync(os.path.join(parent, name))
        if final.exists():
            if keep_existing:
                shutil.rmtree(tmp)
                return final
            shutil.rmtree(final)
        os.replace(tmp, final)
        fsync(final.parent)
        return final
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
