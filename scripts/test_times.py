"""Where the test suite's time goes: the slowest files and tests of pytest JUnit reports, as a printed table.

``scripts/test.sh`` prints it after each stage, so every CI log says which files to look at when the suite grows
past its budget (a fresh machine's ``make test`` under 40 minutes). Stage 1 runs files whole on two workers
(``--dist loadfile``), so a file's total is the unit that decides when the stage ends.

    python scripts/test_times.py report.xml [more.xml ...] [--top 15]
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def case_times(paths: list[Path]) -> list[tuple[str, str, float]]:
    """``(file, test, seconds)`` of every test case in the reports (setup and teardown included, as pytest counts)."""
    out = []
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            module = case.get("classname", "").split(".")
            parts = [p for p in module if p and p[0].islower()]  # drop test classes: the file is the module path
            out.append(("/".join(parts) + ".py", case.get("name", ""), float(case.get("time", 0) or 0)))
    return out


def summary(cases: list[tuple[str, str, float]], top: int = 15) -> str:
    """The total, then the ``top`` slowest files and tests, as markdown tables."""
    by_file: dict[str, float] = defaultdict(float)
    counts: dict[str, int] = defaultdict(int)
    for file, _, seconds in cases:
        by_file[file] += seconds
        counts[file] += 1
    total = sum(by_file.values())
    lines = [f"{len(cases)} tests, {total:.0f} s of test time in {len(by_file)} files", "",
             "| file | tests | seconds | share |", "|---|---|---|---|"]  # fmt: skip
    for file, seconds in sorted(by_file.items(), key=lambda kv: -kv[1])[:top]:
        lines.append(f"| {file} | {counts[file]} | {seconds:.1f} | {seconds / total if total else 0:.1%} |")
    lines += ["", "| test | seconds |", "|---|---|"]
    for file, name, seconds in sorted(cases, key=lambda c: -c[2])[:top]:
        lines.append(f"| {file}::{name} | {seconds:.1f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> str:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("reports", nargs="+", type=Path)
    p.add_argument("--top", type=int, default=15)
    args = p.parse_args(argv)
    text = summary(case_times(args.reports), args.top)
    print(text, end="")
    return text


if __name__ == "__main__":
    main()
