"""Where propel keeps converted models and other caches (override with ``PROPEL_CACHE``)."""

from __future__ import annotations

import os
from pathlib import Path


def cache_dir() -> Path:
    """Root of propel's on-disk cache; created on first use."""
    root = os.environ.get("PROPEL_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "propel"
    )
    path = Path(root)
    path.mkdir(parents=True, exist_ok=True)
    return path
