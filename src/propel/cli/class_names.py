"""Where the readable packages' source lies, and which of their modules define a class of a given short name, found
without importing anything.

jsonargparse resolves a short class name (``class_path: ToolEnv``, ``--model.help GRPOModule``) among the imported
subclasses of the type the key expects, so the same name works in one place and fails in another depending on what
happens to be imported (``--model.help GRPOModule`` failed where the full path worked). The command resolves it from
the source instead, before anything heavy loads: a name defined by exactly one class in propel or Lightning is that
class. Scanning every module's text for a top-level ``class Name`` takes a fraction of a second, done once and only
when a short name appears.
"""

from __future__ import annotations

import importlib.util
import re
from functools import cache
from pathlib import Path

READABLE = ("propel", "lightning")
"""Top-level packages whose source is read; a class elsewhere is unknown."""
PREFERRED = ("propel.", "lightning.pytorch.")
"""Where several modules define a class of one name, the first of these prefixes that holds exactly one of them wins
(Lightning's trainer takes ``lightning.pytorch`` loggers and callbacks, not Fabric's of the same name)."""
_CLASS = re.compile(r"^class (\w+)\b", re.MULTILINE)


@cache
def package_root(top: str) -> Path | None:
    """The folder of top-level package ``top`` (nothing is imported), or None when it is not installed."""
    spec = importlib.util.find_spec(top)
    locations = list(spec.submodule_search_locations or []) if spec else []
    return Path(locations[0]) if locations else None


def module_file(module: str) -> Path | None:
    """The source file of dotted ``module`` in a readable package, or None."""
    top, *rest = module.split(".")
    root = package_root(top) if top in READABLE else None
    if root is None:
        return None
    base = root.joinpath(*rest)
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


@cache
def _index() -> dict[str, tuple[str, ...]]:
    """Every top-level class name in the readable packages -> the modules that define one of that name."""
    found: dict[str, list[str]] = {}
    for top in READABLE:
        root = package_root(top)
        if root is None:
            continue
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root.parent).with_suffix("").parts
            module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            for name in _CLASS.findall(text):
                found.setdefault(name, []).append(module)
    return {name: tuple(modules) for name, modules in found.items()}


def defining_class(name: str) -> str | None:
    """``module.Name`` of the one class called ``name`` in the readable packages (``PREFERRED`` settles a name
    several define), or None when none or several do."""
    paths = [f"{module}.{name}" for module in _index().get(name, ())]
    if len(paths) == 1:
        return paths[0]
    for prefix in PREFERRED:
        preferred = [p for p in paths if p.startswith(prefix)]
        if preferred:
            return preferred[0] if len(preferred) == 1 else None
    return None


def class_names() -> list[str]:
    """Every top-level class name in the readable packages (for suggestions)."""
    return sorted(_index())
