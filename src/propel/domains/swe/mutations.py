"""Procedural bugs: small libcst mutations of a repo's code under test, as diffs (the model-free baseline generator).

Six transforms, each a list of sites found in one deterministic walk of a module (inside function bodies only, so a
module still imports): ``flip_comparison`` (``<`` to ``>=``, ``==`` to ``!=``, ``in`` to ``not in`` ...),
``flip_operator`` (``+``/``-``, ``*``/``//``, ``&``/``|``, ``<<``/``>>``), ``off_by_one`` (an integer operand of
arithmetic, a comparison or a subscript, plus or minus one), ``swap_arguments`` (the first two positional arguments
of a call), ``remove_statement`` (one simple statement of a block that keeps at least one other), and
``change_constant`` (``True``/``False`` flipped, any other integer literal changed). ``generate_bugs`` picks sites
round-robin over the transforms (in a seeded order; each transform's sites seeded-shuffled): same seed, same diffs.

The operator tables are built from pairs and checked for repeated keys: SWE-smith's ``FLIPPED_OPERATORS`` listed
``BitAnd`` twice, so one of its flips silently never happened.
"""

from __future__ import annotations

import os
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, WhitespaceInclusivePositionProvider

from propel.domains.swe.diffs import unified_diff
from propel.domains.swe.repos import RepoProfile

TRANSFORMS = (
    "flip_comparison",
    "flip_operator",
    "off_by_one",
    "swap_arguments",
    "remove_statement",
    "change_constant",
)


def _symmetric(pairs: Sequence[tuple[type, type]]) -> dict[type, type]:
    """``{a: b, b: a}`` for each pair; raises if an operator appears twice (the SWE-smith duplicate-key bug)."""
    table: dict[type, type] = {}
    for a, b in pairs:
        for key, value in ((a, b), (b, a)):
            if key in table:
                raise ValueError(f"operator {key.__name__} appears in two pairs")
            table[key] = value
    return table


FLIPPED_COMPARISONS = _symmetric(
    [
        (cst.LessThan, cst.GreaterThanEqual),
        (cst.GreaterThan, cst.LessThanEqual),
        (cst.Equal, cst.NotEqual),
        (cst.Is, cst.IsNot),
        (cst.In, cst.NotIn),
    ]
)
FLIPPED_OPERATORS = _symmetric(
    [
        (cst.Add, cst.Subtract),
        (cst.Multiply, cst.FloorDivide),
        (cst.BitAnd, cst.BitOr),
        (cst.LeftShift, cst.RightShift),
    ]
)


@dataclass(frozen=True)
class Mutation:
    """One procedural bug."""

    transform: str
    path: str
    """The mutated file, relative to the checkout."""
    line: int
    """Line of the mutated node in the clean file."""
    diff: str
    """A git-style diff against the clean checkout."""


class _Sites(cst.CSTVisitor):
    """Collects ``(transform, node)`` candidates in traversal order, inside function bodies only."""

    def __init__(self) -> None:
        super().__init__()
        self.sites: list[tuple[str, cst.CSTNode]] = []
        self._depth = 0
        self._ints: set[int] = set()  # ids of integers already an off_by_one site

    def _add(self, transform: str, node: cst.CSTNode) -> None:
        if self._depth:
            self.sites.append((transform, node))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._depth -= 1

    def visit_Comparison(self, node: cst.Comparison) -> None:
        if len(node.comparisons) == 1 and type(node.comparisons[0].operator) in FLIPPED_COMPARISONS:
            self._add("flip_comparison", node.comparisons[0])
        for operand in (node.left, *(c.comparator for c in node.comparisons)):
            self._int_site(operand)

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        strings = (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
        if type(node.operator) in FLIPPED_OPERATORS and not isinstance(node.left, strings + (cst.List, cst.Tuple)):
            self._add("flip_operator", node)
        self._int_site(node.left)
        self._int_site(node.right)

    def visit_Index(self, node: cst.Index) -> None:
        self._int_site(node.value)

    def visit_Slice(self, node: cst.Slice) -> None:
        self._int_site(node.lower)
        self._int_site(node.upper)

    def _int_site(self, node) -> None:
        if isinstance(node, cst.Integer) and self._depth:
            self._ints.add(id(node))
            self._add("off_by_one", node)

    def visit_Integer(self, node: cst.Integer) -> None:
        if id(node) not in self._ints:
            self._add("change_constant", node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in ("True", "False"):
            self._add("change_constant", node)

    def visit_Call(self, node: cst.Call) -> None:
        args = node.args
        if len(args) >= 2 and all(a.keyword is None and not a.star for a in args[:2]):
            first, second = (cst.Module([]).code_for_node(a.value) for a in args[:2])
            if first != second:
                self._add("swap_arguments", node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        if len(node.body) < 2:
            return
        for i, stmt in enumerate(node.body):
            if not isinstance(stmt, cst.SimpleStatementLine):
                continue
            if len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Pass):
                continue
            if i == 0 and _is_docstring(stmt):
                continue
            self._add("remove_statement", stmt)


def _is_docstring(stmt: cst.SimpleStatementLine) -> bool:
    return isinstance(stmt.body[0], cst.Expr) and isinstance(
        stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)
    )


def _replacement(transform: str, node: cst.CSTNode, rng: random.Random):
    if transform == "flip_comparison":
        op = node.operator
        flipped = FLIPPED_COMPARISONS[type(op)](
            whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after
        )
        return lambda n: n.with_changes(operator=flipped)
    if transform == "flip_operator":
        op = node.operator
        flipped = FLIPPED_OPERATORS[type(op)](
            whitespace_before=op.whitespace_before, whitespace_after=op.whitespace_after
        )
        return lambda n: n.with_changes(operator=flipped)
    if transform == "off_by_one":
        value = int(node.evaluated_value)
        new = value + 1 if value == 0 or rng.random() < 0.5 else value - 1
        return lambda n: n.with_changes(value=str(new))
    if transform == "change_constant":
        if isinstance(node, cst.Name):
            return lambda n: n.with_changes(value="False" if n.value == "True" else "True")
        value = int(node.evaluated_value)
        new = 1 if value == 0 else (0 if value == 1 else value * 2)
        return lambda n: n.with_changes(value=str(new))
    if transform == "swap_arguments":

        def swap(n: cst.Call) -> cst.Call:
            args = list(n.args)
            args[0], args[1] = args[0].with_changes(value=args[1].value), args[1].with_changes(value=args[0].value)
            return n.with_changes(args=args)

        return swap
    if transform == "remove_statement":
        return None  # whole lines go (see ``_Module.mutate``)
    raise ValueError(f"unknown transform {transform!r}; known: {', '.join(TRANSFORMS)}")


class _Module:
    """One parsed module: its source, its mutation sites and where each site's code is in the text.

    A mutation splices the new node's code into the source at the old node's span (libcst's whitespace-inclusive
    positions are exactly the text a node generates), instead of rebuilding the whole tree per mutation.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        wrapper = MetadataWrapper(cst.parse_module(source), unsafe_skip_copy=True)
        collector = _Sites()
        wrapper.visit(collector)
        self.sites = collector.sites
        self._spans = wrapper.resolve(WhitespaceInclusivePositionProvider)
        self._starts = [0]
        for line in source.splitlines(keepends=True):
            self._starts.append(self._starts[-1] + len(line))

    def _offset(self, position) -> int:
        return self._starts[position.line - 1] + position.column

    def mutate(self, k: int, rng: random.Random) -> tuple[str, int] | None:
        """The source with site ``k`` mutated and the site's line, or None when it cannot be spliced or compiled."""
        transform, node = self.sites[k]
        span = self._spans[node]
        begin, end = self._offset(span.start), self._offset(span.end)
        empty = cst.Module([])
        line = span.start.line
        if transform == "remove_statement":  # whole lines go: from the statement's own line (after its leading
            line += len(node.leading_lines)  # comments and blank lines) through its newline
            first = self._starts[line - 1]
            if self.source[first:end].strip() != empty.code_for_node(node.with_changes(leading_lines=())).strip():
                return None  # shares its line with other code
            code = self.source[:first] + self.source[end:]
        else:
            if self.source[begin:end] != empty.code_for_node(node):
                return None
            new = empty.code_for_node(_replacement(transform, node, rng)(node))
            code = self.source[:begin] + new + self.source[end:]
        try:
            compile(code, "<mutant>", "exec")
        except SyntaxError:
            return None
        return code, line


def source_files(profile: RepoProfile, root: str | os.PathLike) -> list[str]:
    """The checkout's code under test (relative paths, sorted)."""
    root = Path(root)
    found = (p.relative_to(root).as_posix() for p in root.rglob("*.py") if ".git" not in p.parts)
    return sorted(p for p in found if profile.is_source_path(p))


def generate_bugs(
    profile: RepoProfile,
    root: str | os.PathLike,
    n: int,
    seed: int = 0,
    transforms: Sequence[str] = TRANSFORMS,
) -> list[Mutation]:
    """Up to ``n`` distinct mutations of the repo's code, round-robin over ``transforms``; the same seed, the same bugs.

    Bugs are candidates: whether one is valid (some test fails) is for ``BugValidator`` to say.
    """
    unknown = set(transforms) - set(TRANSFORMS)
    if unknown:
        raise ValueError(f"unknown transforms {sorted(unknown)}; known: {', '.join(TRANSFORMS)}")
    rng = random.Random(f"{profile.key}:{seed}")
    modules: dict[str, _Module] = {}
    pools: dict[str, list[tuple[str, int]]] = {t: [] for t in transforms}
    for path in source_files(profile, root):
        try:
            module = modules[path] = _Module((Path(root) / path).read_text(encoding="utf-8"))
        except cst.ParserSyntaxError:
            continue
        for k, (transform, _) in enumerate(module.sites):
            if transform in pools:
                pools[transform].append((path, k))
    for pool in pools.values():
        rng.shuffle(pool)
    out: list[Mutation] = []
    seen: set[str] = set()
    order = [t for t in transforms if pools[t]]
    rng.shuffle(order)
    turn = 0
    while len(out) < n and order:
        transform = order[turn % len(order)]
        path, k = pools[transform].pop()
        if pools[transform]:
            turn += 1
        else:
            order.remove(transform)
        got = modules[path].mutate(k, rng)
        if got is None:
            continue
        code, line = got
        diff = unified_diff(path, modules[path].source, code)
        if diff and diff not in seen:
            seen.add(diff)
            out.append(Mutation(transform, path, line, diff))
    return out
