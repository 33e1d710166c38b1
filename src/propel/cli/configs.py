"""``propel configs [DEST]``: the shipped configs copied into a folder (``./configs`` by default) to edit.

An installed wheel runs its configs by name (``propel fit -c grpo/base -c math/grpo``); a user who wants to change
one copies them out and passes the copies by path (``-c configs/math/grpo.yaml``), with the fragments they name
(``domain: domain.yaml``) copied beside them. An existing folder is left alone unless ``--force``.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from propel.errors import PropelError
from propel.paths import shipped_configs

PATTERNS = ("*.yaml", "*.yml")
"""What a config folder holds (a checkout's ``__pycache__`` or editor files are not copied)."""


def copy_configs(dest: str | Path, force: bool = False) -> list[Path]:
    """Copy every shipped config into ``dest`` (its relative layout kept); the files written. ``dest`` must not
    exist unless ``force`` (then same-named files are replaced and the others kept)."""
    source, dest = shipped_configs(), Path(dest)
    if dest.exists() and dest.resolve() == source.resolve():
        raise PropelError(f"{dest} is the shipped configs folder itself; pass another DEST")
    if dest.exists() and not force:
        raise PropelError(f"{dest} exists; pass --force to overwrite its shipped configs, or another DEST")
    written = []
    for pattern in PATTERNS:
        for file in sorted(source.rglob(pattern)):
            target = dest / file.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, target)
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="propel configs",
        description="Copy the configs that ship with propel into DEST, to edit them and pass them by path.",
    )
    parser.add_argument("dest", nargs="?", default="configs", help="folder to create (default: ./configs)")
    parser.add_argument("--force", action="store_true", help="write into DEST even if it exists")
    args = parser.parse_args(argv)
    written = copy_configs(args.dest, args.force)
    print(
        f"propel: copied {len(written)} configs into {args.dest}/; run an edited one by path, e.g. "
        f"propel fit -c {args.dest}/grpo/base.yaml -c {args.dest}/math/grpo.yaml"
    )
