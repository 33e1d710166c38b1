"""Files that survive a kill or a power loss whole or not at all: write under a temporary name, flush the bytes to
the disk, rename, then flush the folder entry (the rename itself). Every writer of resumable outputs uses this."""

from __future__ import annotations

import os
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
