"""External scorecard: propel's HumanEval grader on programs no one here wrote, correct and wrong, counted per class.

The corpus is jamesmurdza/humaneval-results (public on GitHub; no license file, so it is read from a clone, never
copied into this repository): GPT-4, GPT-3.5-turbo and CodeLlama-34B-Instruct, 10 runs per HumanEval task, each run
a whole program with the verdict of HumanEval's own harness (``Result: Pass`` / ``Fail``). Identical programs of a
task are graded once; a program the harness labelled both ways is counted apart. Each is graded by
``TestSuiteReward`` (value grading, the local sandbox) and, from the same run's test outcomes, by the rule before
held-out tests were made unseen (the held-out pass rate of the old split: the first third of the tests visible).

Per class (targets in brackets): correct programs graded 1.0 [all], and why the others are not (a failed visible
test, a failed original held-out test, a failed reference-generated test, a flag); wrong programs graded 1.0
[none], before and after.

    git clone https://github.com/jamesmurdza/humaneval-results /tmp/humaneval-results
    .venv/bin/python benchmarks/external_scorecard.py --corpus /tmp/humaneval-results   # ~15 min on 2 cores
"""

from __future__ import annotations

import argparse
import math
import re
import time
from collections import Counter, defaultdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

RUN = re.compile(r"^### (?:✅|❌) Run \d+\n(.*?)(?=^### |\Z)", re.MULTILINE | re.DOTALL)
CODE = re.compile(r"```python\n(.*?)```", re.DOTALL)
RESULT = re.compile(r"^Result: (Pass|Fail)", re.MULTILINE)
SOLUTION = "solution.py"


def read_corpus(root: Path) -> tuple[list[tuple[str, str, str, str]], int]:
    """``([(model, task id, label, program)], runs without a program)``."""
    out, empty = [], 0
    for path in sorted(root.glob("*/*.md")):
        model, task = path.parent.name, f"HumanEval/{path.stem}"
        for run in RUN.finditer(path.read_text(encoding="utf-8")):
            code, result = CODE.search(run.group(1)), RESULT.search(run.group(1))
            if code is None or result is None:
                empty += 1
                continue
            out.append((model, task, "correct" if result.group(1) == "Pass" else "wrong", code.group(1)))
    return out, empty


def old_hidden(row) -> list[str]:
    """The held-out test bodies of the split before: all but the first third."""
    from propel.tasks.humaneval.tasks import split_check

    _, bodies = split_check(row["test"])
    return bodies[max(1, math.ceil(len(bodies) / 3)) if bodies else 0 :]


def why_not_full(task, info) -> str:
    tests = info["tests"]
    if info["hacked"]:
        return "flagged: " + ", ".join(info["flags"])
    if any(tests.get(n) != "passed" for n in task.hidden):
        return "failed an original held-out test"
    if any(tests.get(n) != "passed" for n in tests if n.startswith("test_generated_")):
        return "failed a reference-generated test"
    if any(tests.get(n) != "passed" for n in task.visible):
        return "failed a visible test only"
    return info["reason"][:60]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", required=True, type=Path, help="a clone of jamesmurdza/humaneval-results")
    parser.add_argument("--limit", type=int, default=0, help="grade only the first N unique programs (0: all)")
    args = parser.parse_args(argv)

    from propel.records import Sample
    from propel.rewards import TestSuiteReward
    from propel.sandbox import make_sandbox
    from propel.tasks.humaneval.tasks import humaneval_rows, task_from_row

    rows = {r["task_id"]: r for r in humaneval_rows()}
    tasks = {tid: task_from_row(r) for tid, r in rows.items()}
    runs, empty = read_corpus(args.corpus)
    labels: dict[tuple[str, str], set[str]] = defaultdict(set)
    for _, task_id, label, code in runs:
        labels[(task_id, code)].add(label)
    unique = [key for key in labels if key[0] in tasks]
    if args.limit:
        unique = unique[: args.limit]
    start = time.perf_counter()
    samples = [
        Sample(
            prompt="", completion="", context=tasks[t].single_turn_context(), artifacts={"files": {"solution.py": c}}
        )
        for t, c in unique
    ]
    with make_sandbox("local", max_workers=2) as sandbox:
        rewards = TestSuiteReward(sandbox=sandbox, timeout_s=5.0, batch_size=16, seed=0)(samples).tolist()
    wall = time.perf_counter() - start
    counts: dict[str, Counter] = defaultdict(Counter)
    reasons: dict[str, Counter] = defaultdict(Counter)
    for (task_id, _), reward, sample in zip(unique, rewards, samples, strict=True):
        kinds = labels[(task_id, _)]
        cls = next(iter(kinds)) if len(kinds) == 1 else "labelled both ways"
        task, info = tasks[task_id], sample.info["test_suite"]
        by_body = {body: name for name, body in {**task.visible, **task.hidden}.items()}
        before = [by_body.get(b) for b in old_hidden(rows[task_id])] or list(task.visible)
        old = sum(info["tests"].get(n) == "passed" for n in before) / len(before) if before else 0.0
        counts[cls].update(
            programs=1,
            full_after=reward == 1.0,
            full_before=old == 1.0,
            flagged=bool(info["hacked"]),
            generated=bool(info.get("generated")),
        )
        counts[cls]["reward_after"] += reward
        counts[cls]["reward_before"] += old
        if reward != 1.0:
            reasons[cls][why_not_full(task, info)] += 1
    console = Console(width=200)
    table = Table(title=f"External scorecard: {len(unique)} unique programs from {len(runs)} runs ({empty} runs empty)")
    for col in ("class", "programs", "graded 1.0 before", "graded 1.0 after", "mean before", "mean after", "flagged"):
        table.add_column(col, justify="right")
    for cls in ("correct", "wrong", "labelled both ways"):
        c = counts.get(cls)
        if not c:
            continue
        n = c["programs"]
        table.add_row(
            cls,
            str(n),
            str(c["full_before"]),
            str(c["full_after"]),
            f"{c['reward_before'] / n:.3f}",
            f"{c['reward_after'] / n:.3f}",
            str(c["flagged"]),
        )
    console.print(table)
    for cls, why in reasons.items():
        console.print(f"{cls}, not graded 1.0 after: " + "; ".join(f"{k}: {v}" for k, v in why.most_common()))
    console.print(f"{wall:.0f} s grading, {len(unique) / wall:.2f} programs/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
