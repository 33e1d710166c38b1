"""The layering rule, checked: a module imports only from strictly lower floors or from its own sub-package.

Every ``import`` counts (module level, inside functions, under ``if TYPE_CHECKING:``, relative), so a lazy import
cannot hide an upward dependency. New sub-packages must be placed in ``FLOORS`` before anything can import them.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "propel"

# Lowest first. A floor is a set of top-level sub-packages (or top-level module files, without ``.py``) of propel;
# ``__init__`` is the root package module: metadata only, importable from anywhere, importing nothing of propel.
# docs/architecture.md draws the same table.
FLOORS: list[set[str]] = [
    # fleet: routing and cool-down over servers or hosts; host_memory: freed memory back to the system;
    # python_ast: Python source to an AST, safe across threads; records: Prompt, Context, Task, Sample, Turn, TaskSource
    {"__init__", "errors", "paths", "fleet", "durable", "host_memory", "python_ast", "records", "renamed"},
    {"losses", "metrics", "sandbox", "models", "loggers", "cli"},  # cli: the command, YAML -> objects
    {"engines", "testsuite"},  # testsuite: pytest suites run in the sandbox, hack detectors
    {"domains"},
    {"tasks", "pools"},  # task sources (contexts with gold data); task pools (rows, files, summaries)
    {"probes", "envs"},  # agent environments need sandboxes and contexts, nothing above
    {"rollouts"},  # the rollout record and its production (single-turn, and agent episodes driving envs)
    {"rewards"},  # a reward is a function of rollout records
    {"datamodules", "lit_modules", "jobs", "served"},  # jobs: the probe job; served: propel's envs as OpenEnv ones
    {"callbacks"},
    {"pipeline"},
    {"testing"},  # red-team data, honest variants and test fixtures (tests and benchmarks only)
]


def _unit(path: Path, root: Path) -> str:
    """The layering unit of a source file: its top-level sub-package, or its module name for a top-level file."""
    rel = path.relative_to(root)
    return rel.parts[0] if len(rel.parts) > 1 else rel.stem


def _module_name(path: Path, root: Path) -> list[str]:
    """Dotted package path of ``path`` (``propel.probes`` for ``probes/sweep.py`` and ``probes/__init__.py``)."""
    rel = path.relative_to(root)
    return [root.name, *rel.parts[:-1]]


def _imported(node: ast.AST, path: Path, root: Path) -> list[list[str]]:
    """The dotted names (as parts) an import node brings in; ``from X import name`` yields ``X.name`` per name."""
    if isinstance(node, ast.Import):
        return [a.name.split(".") for a in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        package = _module_name(path, root)
        base = package[: len(package) - node.level + 1]
    else:
        base = []
    base = base + (node.module.split(".") if node.module else [])
    return [base + [a.name] for a in node.names]


def _target(parts: list[str], root: Path) -> str | None:
    """The unit an imported name lives in, or None when it is not part of the package."""
    if not parts or parts[0] != root.name:
        return None
    if len(parts) == 1:
        return "__init__"
    name = parts[1]
    if (root / name).is_dir() or (root / f"{name}.py").is_file():
        return name
    return "__init__"  # ``from propel import __version__``: a name of the root package module


def layering_problems(root: Path, floors: list[set[str]]) -> list[str]:
    """Every upward or same-floor cross-unit import, every unit import cycle, and every unit missing from ``floors``.

    Args:
        root: the package folder (``src/propel``); its name is the package name.
        floors: the floor table, lowest first.
    """
    floor = {unit: level for level, units in enumerate(floors) for unit in units}
    found: list[tuple[Path, int, str]] = []
    edges: dict[str, set[str]] = {}
    units: set[str] = set()
    for path in sorted(root.rglob("*.py")):
        src = _unit(path, root)
        units.add(src)
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            for parts in _imported(node, path, root):
                dst = _target(parts, root)
                if dst is None or dst == src or dst == "__init__":  # the root is loaded before any module anyway
                    continue
                edges.setdefault(src, set()).add(dst)
                if src in floor and dst in floor and floor[dst] >= floor[src]:
                    kind = "same-floor" if floor[dst] == floor[src] else "upward"
                    found.append(
                        (
                            path,
                            node.lineno,
                            f"{path.relative_to(root.parent)}:{node.lineno}: {kind} import {src} (floor {floor[src]}) "
                            f"-> {'.'.join(parts)} ({dst}, floor {floor[dst]})",
                        )
                    )
    problems = list(dict.fromkeys(msg for *_, msg in sorted(found)))
    problems += [
        f"{unit}: not placed in FLOORS (add it to the floor it belongs to)" for unit in sorted(units - set(floor))
    ]
    return problems + [f"import cycle: {' <-> '.join(c)}" for c in _cycles(edges)]


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Groups of units that import each other, directly or through others (strongly connected, size > 1)."""

    def reach(start: str) -> set[str]:
        seen, todo = set(), [start]
        while todo:
            for nxt in edges.get(todo.pop(), ()):
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return seen

    reachable = {u: reach(u) for u in edges}
    groups = {frozenset({u} | {v for v in reachable[u] if u in reachable.get(v, ())}) for u in edges}
    return sorted(sorted(g) for g in groups if len(g) > 1)


def _module_file(parts: list[str], root: Path) -> Path | None:
    """The file an imported dotted name lives in (the longest prefix that is a module or a package)."""
    for end in range(len(parts), 1, -1):
        base = root.parent.joinpath(*parts[:end])
        if base.with_suffix(".py").is_file():
            return base.with_suffix(".py")
        if (base / "__init__.py").is_file():
            return base / "__init__.py"
    return None


def file_cycles(root: Path) -> list[list[str]]:
    """Groups of files that import each other (every import counts; a package's ``__init__.py``, which only hands
    names on, is left out, as in the floor table)."""
    edges: dict[str, set[str]] = {}
    for path in sorted(root.rglob("*.py")):
        if path.name == "__init__.py":
            continue
        src = str(path.relative_to(root.parent))
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for parts in _imported(node, path, root):
                    dst = _module_file(parts, root) if parts and parts[0] == root.name else None
                    if dst is not None and dst.name != "__init__.py" and dst != path:
                        edges.setdefault(src, set()).add(str(dst.relative_to(root.parent)))
    return _cycles(edges)


def test_no_file_imports_itself_through_others():
    cycles = file_cycles(SRC)
    assert not cycles, "file-level import circles:\n" + "\n".join(" <-> ".join(c) for c in cycles)


def test_propel_imports_only_downward():
    problems = layering_problems(SRC, FLOORS)
    assert not problems, f"{len(problems)} layering problem(s):\n" + "\n".join(problems)


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "pkg" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "pkg"


def test_checker_reports_every_kind_of_violation(tmp_path):
    """The checker can fail: lazy, TYPE_CHECKING, relative and same-floor imports, cycles and unplaced units."""
    root = _write(
        tmp_path,
        {
            "__init__.py": '__version__ = "0"\n',
            "errors.py": "import os\nfrom pkg import __version__\n",
            "low/__init__.py": "from pkg.low.a import x\n",
            "low/a.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n"
                "    from pkg.high import thing\n"
                "def f():\n"
                "    from ..high.mod import other\n"
                "x = 1\n"
            ),
            "high/__init__.py": "import pkg.low\nfrom pkg import errors\n",
            "high/mod.py": "from . import thing\nfrom pkg.side import y\n",
            "side/__init__.py": "from pkg.low import x\n",
            "stray/__init__.py": "from pkg.errors import E\n",
        },
    )
    floors = [{"__init__", "errors"}, {"low"}, {"high", "side"}]
    problems = layering_problems(root, floors)
    text = "\n".join(problems)
    assert "pkg/low/a.py:3: upward import low (floor 1) -> pkg.high.thing (high, floor 2)" in text  # TYPE_CHECKING
    assert "pkg/low/a.py:5: upward import low (floor 1) -> pkg.high.mod.other (high, floor 2)" in text  # lazy, relative
    assert "pkg/high/mod.py:2: same-floor import high (floor 2) -> pkg.side.y (side, floor 2)" in text
    assert "stray: not placed in FLOORS" in text
    assert "import cycle: high <-> low <-> side" in text
    assert len(problems) == 5, text  # nothing else: downward, same-package and external imports are fine

    ok = [{"__init__", "errors"}, {"low"}, {"side"}, {"high"}, {"stray"}]
    (root / "low" / "a.py").write_text("x = 1\n")
    assert layering_problems(root, ok) == []
