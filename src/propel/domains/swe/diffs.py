"""Apply a (model-written) diff to a throw-away copy of a clean checkout with ``git apply``, and make unified diffs.

``apply_diff`` is the first validity test of a bug and the way a repair is laid over it: git parses the patch
(``--numstat``: which paths it touches), checks it (``--check``: every hunk applies to the pristine files) and then
applies it, outside any repository, to a copy; the changed files come back as a ``Variant`` for the suite runner.
git refuses paths outside the tree; a patch that leaves a symlink behind is refused here (reading it back would
follow it out of the copy).
"""

from __future__ import annotations

import difflib
import os
import shutil
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from propel.domains.swe.checkout import git


@dataclass
class AppliedDiff:
    """What a diff did to a copy of the checkout."""

    ok: bool
    """False when git could not parse or apply the diff (``error`` says why)."""
    error: str = ""
    paths: tuple[str, ...] = ()
    """Paths the diff touches: what git reads in it (both sides of renames) and every file whose content changed."""
    files: dict[str, bytes | None] = field(default_factory=dict)
    """New content of each touched path that changed, ``None`` for a deleted file (the suite runner's variant)."""


def diff_paths(root: str | os.PathLike, diff: str) -> tuple[str, ...] | str:
    """The paths a diff touches (both sides of renames and copies), or git's error when git cannot read it."""
    proc = git(root, "apply", "--numstat", "-z", "-", input=_text(diff).encode(), check=False)
    if proc.returncode != 0:
        return _error(proc)
    paths = [f.split("\t", 2)[-1] for f in proc.stdout.decode("utf-8", "replace").split("\0")]
    for line in diff.splitlines():  # git's numstat names only the new side of a rename
        for head, strip in (("--- a/", 6), ("+++ b/", 6), ("rename from ", 12), ("rename to ", 10), ("copy to ", 8)):
            if line.startswith(head):
                paths.append(line[strip:].split("\t")[0].strip())
    return tuple(dict.fromkeys(p for p in paths if p))


def apply_diff(root: str | os.PathLike, diff: str, base: Mapping[str, bytes | None] | None = None) -> AppliedDiff:
    """Apply ``diff`` to a copy of the checkout at ``root`` (with ``base``, an earlier variant, laid over it first).

    The returned ``files`` hold ``base`` merged with what this diff changed, so a bug and then its repair compose.
    """
    paths = diff_paths(root, diff)
    if isinstance(paths, str):
        return AppliedDiff(False, paths)
    with tempfile.TemporaryDirectory(prefix="propel-swe-") as tmp:
        work = Path(tmp) / "tree"
        shutil.copytree(root, work, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        for name, data in (base or {}).items():
            target = work / name
            if data is None:
                target.unlink(missing_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        before = _tree(work)
        for args in (("--check",), ()):
            proc = git(work, "apply", *args, "-", input=_text(diff).encode(), check=False)
            if proc.returncode != 0:
                return AppliedDiff(False, _error(proc), paths)
        after = _tree(work)
        links = [p for p, data in after.items() if data is _LINK and before.get(p) is not _LINK]
        if links:
            return AppliedDiff(False, f"the diff makes {links[0]} a symbolic link", paths)
        changed = sorted(p for p in before.keys() | after.keys() if before.get(p) != after.get(p))
        paths = tuple(dict.fromkeys([*paths, *changed]))
        files = dict(base or {})
        files.update({p: after.get(p) for p in changed})
    return AppliedDiff(True, "", paths, files)


def unified_diff(path: str, before: str, after: str, new_file: bool = False) -> str:
    """A git-style diff of one file (``a/``/``b/`` prefixes) that ``git apply`` accepts; ``""`` when equal.

    ``new_file``: the file did not exist before (``before`` is ignored; the diff creates it).
    """
    if new_file:
        before = ""
    elif before == after:
        return ""
    lines = list(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            "/dev/null" if new_file else f"a/{path}",
            f"b/{path}",
            n=3,
        )
    )
    out = [f"diff --git a/{path} b/{path}\n", *(["new file mode 100644\n"] if new_file else [])]
    for line in lines:
        out.append(line)
        if not line.endswith("\n"):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


_LINK = b"\0symlink\0"  # a symlink's marker in ``_tree`` (never read through)


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root``: relative path -> bytes (symlinks as ``_LINK``)."""
    out: dict[str, bytes] = {}
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            out[path.relative_to(root).as_posix()] = _LINK if path.is_symlink() else path.read_bytes()
    return out


def _text(diff: str) -> str:
    return diff if diff.endswith("\n") else diff + "\n"


def _error(proc) -> str:
    message = proc.stderr.decode("utf-8", "replace").strip() or f"git apply exited with {proc.returncode}"
    return message.splitlines()[0][:300] if message else message
