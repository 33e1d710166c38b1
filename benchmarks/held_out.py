"""Held out means unseen, measured on all 164 HumanEval tasks: the split before and after, and what it pays.

Before: the first third of each task's tests visible, the rest held out, whatever their inputs. After: a held-out
test that calls the function with an input the prompt or a visible test shows joins the visible ones
(``propel.testsuite.shown``), and a task left with fewer than ``MIN_HELD_OUT`` distinct held-out inputs gets
reference-generated ones (``propel.testsuite.held_out``). Printed:

- tasks (and tests) whose held-out tests repeat a shown input, before and after [after: 0];
- tasks short of ``MIN_HELD_OUT`` held-out inputs, those that gained reference-generated inputs and how many;
- the canonical solutions' reward after [1.0 on every task];
- the prompt-examples completion (``testsuite_hacks``' ``answers_the_prompt_examples``: it parses its own prompt's
  examples, answers them and raises elsewhere): tasks where it earns above 0 and its mean reward, before (the
  held-out pass rate over the old split) and after [0].

    .venv/bin/python benchmarks/held_out.py            # ~3 min on 2 cores
"""

from __future__ import annotations

import argparse
import math
import time

from rich.console import Console
from rich.table import Table


def old_task(row):
    """The task as it was split before: the first third visible, the rest held out."""
    from propel.tasks.humaneval.tasks import CodeTask, split_check

    preamble, bodies = split_check(row["test"])
    n = max(1, math.ceil(len(bodies) / 3)) if bodies else 0
    return CodeTask(
        task_id=row["task_id"],
        prompt=row["prompt"],
        entry_point=row["entry_point"],
        reference=row["prompt"] + row["canonical_solution"],
        preamble=preamble,
        visible={f"test_visible_{i}": b for i, b in enumerate(bodies[:n])},
        hidden={f"test_hidden_{i}": b for i, b in enumerate(bodies[n:])},
    )


def repeats(task) -> int:
    """Held-out tests of ``task`` that call the function with an input its prompt or a visible test shows."""
    from propel.testsuite.shown import Shown, body_inputs

    seen = [a for b in task.visible.values() for a in body_inputs(b, task.entry_point) if a is not None]
    shown = Shown.of(task.prompt, task.entry_point, seen)
    return sum(
        any(shown.shows(a) for a in body_inputs(b, task.entry_point) if a is not None) for b in task.hidden.values()
    )


def grade(sandbox, tasks, sources):
    from propel.records import Sample
    from propel.rewards import TestSuiteReward

    samples = [
        Sample(prompt="", completion="", context=t.single_turn_context(), artifacts={"files": {"solution.py": s}})
        for t, s in zip(tasks, sources, strict=True)
    ]
    rewards = TestSuiteReward(sandbox=sandbox, timeout_s=5.0, batch_size=16, seed=0)(samples).tolist()
    return rewards, [s.info["test_suite"] for s in samples]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=164, help="the first N tasks")
    parser.add_argument("--backend", default="local", choices=("local", "docker"))
    args = parser.parse_args(argv)

    from propel.sandbox import make_sandbox
    from propel.tasks.humaneval.tasks import humaneval_rows, task_from_row
    from propel.testing.testsuite_hacks import CORPUS, single_source
    from propel.testsuite.held_out import MIN_HELD_OUT
    from propel.testsuite.shown import distinct_inputs

    rows = humaneval_rows()[: args.tasks]
    before, after = [old_task(r) for r in rows], [task_from_row(r) for r in rows]
    parser_entry = next(e for e in CORPUS if e.name == "answers_the_prompt_examples")
    start = time.perf_counter()
    with make_sandbox(args.backend, max_workers=2) as sandbox:
        canon, canon_info = grade(sandbox, after, [t.reference for t in after])
        _, old_info = grade(sandbox, before, [single_source(parser_entry, t) for t in before])
        new, _ = grade(sandbox, after, [single_source(parser_entry, t) for t in after])
    old = []
    for task, info in zip(before, old_info, strict=True):
        names = list(task.hidden) or list(task.visible)
        old.append(sum(info["tests"].get(n) == "passed" for n in names) / len(names) if names else 0.0)
    short = [t for t in after if distinct_inputs(list(t.hidden.values()), t.entry_point) < MIN_HELD_OUT]
    gained = [i["generated"] for i in canon_info if i.get("generated")]
    n = len(rows)
    table = Table(title=f"Held out means unseen: {n} HumanEval tasks ({args.backend} sandbox)")
    for col in ("measure", "before", "after"):
        table.add_column(col, justify="right")
    rep_before, rep_after = [repeats(t) for t in before], [repeats(t) for t in after]
    table.add_row(
        "tasks whose held-out tests repeat a shown input",
        f"{sum(r > 0 for r in rep_before)} ({sum(rep_before)} tests)",
        f"{sum(r > 0 for r in rep_after)} ({sum(rep_after)} tests)",
    )
    table.add_row(
        f"tasks with < {MIN_HELD_OUT} distinct held-out inputs",
        str(sum(distinct_inputs(list(t.hidden.values()), t.entry_point) < MIN_HELD_OUT for t in before)),
        f"{len(short)} before generation, {len(short) - len(gained)} after",
    )
    table.add_row("tasks that gained reference-generated inputs", "-", f"{len(gained)} ({sum(gained)} inputs)")
    table.add_row("canonical solutions scoring 1.0", "-", f"{sum(r == 1.0 for r in canon)} of {n}")
    table.add_row(
        "prompt-examples completion: tasks paid > 0",
        str(sum(r > 0 for r in old)),
        str(sum(r > 0 for r in new)),
    )
    table.add_row("prompt-examples completion: mean reward", f"{sum(old) / n:.3f}", f"{sum(new) / n:.3f}")
    console = Console(width=160)
    console.print(table)
    bad = [t.task_id for t, r in zip(after, canon, strict=True) if r != 1.0]
    paid = [t.task_id for t, r in zip(after, new, strict=True) if r > 0]
    if bad:
        console.print(f"[red]canonical below 1.0: {bad[:12]}")
    if paid:
        console.print(f"[red]prompt-examples completion paid on: {paid[:12]}")
    console.print(f"{time.perf_counter() - start:.0f} s")
    return 1 if bad or paid or any(rep_after) else 0


if __name__ == "__main__":
    raise SystemExit(main())
