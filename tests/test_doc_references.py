"""Every backticked reference in the docs, the README and the package's docstrings resolves: a ``propel.x.y`` name
imports (a module, or an attribute of one; entry-point groups of ``pyproject.toml`` aside), a repository path
(``src/...``, ``configs/...``, ``benchmarks/...``, ``experiments/...``, ``tests/...``, ``docs/...``,
``scripts/...``) exists, and so does a path inside the package (``probes/sweep.py``). A rename that leaves a stale
reference fails here. The pages read are the README, ``docs/`` and the experiments' READMEs."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "propel"
TICKED = re.compile(r"(?<!`)``?([^`\s]+?)``?(?!`)")
NAME = re.compile(r"^propel(\.[A-Za-z_]\w*)+(\(\))?$")
PATH = re.compile(r"^(src|configs|benchmarks|experiments|tests|docs|scripts)/[\w./-]+$")
PLACEHOLDER = re.compile(r"[<>{}*]|\.\.\.")
PACKAGE_PATH = re.compile(r"^(\w+)/[\w/]+\.py$")
SUBPACKAGES = {p.name for p in SRC.iterdir() if p.is_dir()}
GROUPS = set(re.findall(r'^\[project\.entry-points\."([^"]+)"\]', (ROOT / "pyproject.toml").read_text(), flags=re.M))
"""Entry-point groups: dotted names that are not modules."""


def _docstrings(path: Path) -> str:
    tree = ast.parse(path.read_text())
    nodes = [tree, *(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef))]
    found = [ast.get_docstring(n, clean=False) or "" for n in nodes]
    # attribute docstrings: a string statement after an assignment
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list):
            found += [
                s.value.value
                for s in body
                if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
            ]
    return "\n".join(found)


def sources() -> dict[str, str]:
    pages = [
        ROOT / "README.md",
        *sorted((ROOT / "docs").rglob("*.md")),
        *sorted((ROOT / "experiments").rglob("*.md")),
    ]
    out = {str(p.relative_to(ROOT)): p.read_text() for p in pages}
    for path in sorted(SRC.rglob("*.py")):
        if "propel_box" in path.parts:  # the in-sandbox package names its own modules (propel_box.x), not propel's
            continue
        out[str(path.relative_to(ROOT))] = _docstrings(path)
    return out


def resolves(name: str) -> bool:
    parts = name.removesuffix("()").split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def stale(text: str) -> list[str]:
    bad = []
    for token in TICKED.findall(text):
        token = token.strip(".,;:()")
        if PLACEHOLDER.search(token):
            continue
        path = token.split("::")[0].split("#")[0]
        name_stale = NAME.match(token) and token not in GROUPS and not resolves(token)
        path_stale = PATH.match(token) and not (ROOT / path).exists()
        inner = PACKAGE_PATH.match(token)
        inner_stale = inner and inner.group(1) in SUBPACKAGES and not (SRC / path).exists()
        if name_stale or path_stale or inner_stale:
            bad.append(token)
    return bad


def test_the_checker_catches_a_stale_name_and_path():
    assert stale("see `propel.rewards.TestSuiteReward` and ``configs/grpo/base.yaml``") == []
    assert stale("see `propel.rewards.NoSuchReward` and `configs/grpo/nope.yaml`") == [
        "propel.rewards.NoSuchReward",
        "configs/grpo/nope.yaml",
    ]
    assert stale("`propel.no_such_module` and `runs/demo/report.md` and `configs/<job>/x.yaml`") == [
        "propel.no_such_module"
    ]
    assert stale("`probes/sweep.py`, `probes/nope.py`, `propel.commands`") == ["probes/nope.py"]


@pytest.mark.parametrize("where", sorted(sources()))
def test_every_reference_resolves(where):
    assert not stale(sources_cache()[where]), f"{where}: stale references {stale(sources_cache()[where])}"


_CACHE: dict[str, str] = {}


def sources_cache() -> dict[str, str]:
    if not _CACHE:
        _CACHE.update(sources())
    return _CACHE
