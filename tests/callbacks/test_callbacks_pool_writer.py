"""Pool parts and trajectory files are durable: each file's bytes and its rename reach the disk before the writer
returns."""

from __future__ import annotations

import os

from propel.pools import read_pool, write_part


def _track(monkeypatch) -> list[tuple[str, str]]:
    """Record every ``os.fsync`` (by the path its descriptor was opened on) and ``os.replace``, in order."""
    events: list[tuple[str, str]] = []
    real_fsync, real_replace, real_open = os.fsync, os.replace, os.open
    opened: dict[int, str] = {}

    def track_open(path, flags, *args, **kwargs):
        fd = real_open(path, flags, *args, **kwargs)
        opened[fd] = os.fspath(path)
        return fd

    def track_fsync(fd):
        events.append(("fsync", opened.get(fd, "?")))
        return real_fsync(fd)

    def track_replace(src, dst):
        events.append(("replace", os.fspath(src)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "open", track_open)
    monkeypatch.setattr(os, "fsync", track_fsync)
    monkeypatch.setattr(os, "replace", track_replace)
    return events


def test_parts_are_fsynced_before_and_after_the_rename(tmp_path, monkeypatch):
    """The temp file is fsynced before ``os.replace`` names it a finished part, and the folder
    after (a power loss then leaves either no part or a whole one, never a named, torn one)."""
    events = _track(monkeypatch)
    row = dict(id="t1", group="g", domain="d", context="{}", completion="c", task=None, valid=True, reason="ok")
    part = write_part(tmp_path / "pool", [row])
    tmp = events[0][1]
    assert os.path.basename(tmp).startswith("." + part.name) and tmp.endswith(".tmp")
    assert events == [("fsync", tmp), ("replace", tmp), ("fsync", str(tmp_path / "pool"))]
    assert read_pool(tmp_path / "pool")["id"].tolist() == ["t1"]


def test_trajectory_files_are_fsynced_before_and_after_the_rename(tmp_path, monkeypatch):
    from propel.records import Sample
    from propel.rollouts.trajectories import read_trajectories, write_trajectories

    events = _track(monkeypatch)
    path = write_trajectories([Sample(prompt="p", completion="c")], tmp_path / "traj" / "step-1.parquet")
    tmp = events[0][1]
    assert os.path.basename(tmp).startswith("." + path.name) and tmp.endswith(".tmp")
    assert events == [("fsync", tmp), ("replace", tmp), ("fsync", str(tmp_path / "traj"))]
    assert [s.completion for s in read_trajectories(path)] == ["c"]
