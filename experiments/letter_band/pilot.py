"""Can a letter-counting domain give the 135M solver a two-sided band? A pilot of the solver side (issue: PROPEL's
mechanism needs tasks that are too easy, in band and too hard, each on at least ~20% of the base distribution).

reasoning-gym's ``letter_counting`` (problems no one here wrote, answers computed by code) at increasing text
lengths; the bundled model answers few-shot ("Question: ... / Answer: <count>", three solved examples from another
seed), and each task's exact solve probability p comes from teacher forcing (``propel.domains.exact_trials``). With
PROPEL's band (1..3 solves of 8), a task is *too hard* when P(0 solves) >= 0.5, *too easy* when P(> 3 solves) >= 0.5,
and *in band* otherwise; the table gives the shares per text length and the mean band utility. Only the solver side:
a generator that writes such tasks is not built here.

    python experiments/letter_band/pilot.py --out docs/experiments/letter_band     # a few minutes on 2 CPU cores
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.stats import binom

from propel.domains.exact_trials import band_utility, solve_probabilities
from propel.domains.interface import AnswerText
from propel.domains.math.answers import parse_number
from propel.engines.engine import SamplingSpec
from propel.engines.factory import make_engine
from propel.metrics.intervals import t_interval
from propel.records import Prompt, Task
from propel.tasks.gym import gym_dataset

BAND, N = (1, 3), 8


class LetterCounting:
    """The two things ``solve_probabilities`` reads of a domain: the solver's prompt and the answer's text."""

    def __init__(self, shots: str):
        self.shots = shots

    def solver_prompt(self, task: Task) -> Prompt:
        return Prompt(text=f"{self.shots}Question: {task.data['question']}\nAnswer:")

    def answer_text(self, task: Task) -> AnswerText:
        return AnswerText(prefix=f" {task.data['answer']}", extends=r"[0-9.,/]")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--words", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--tasks", type=int, default=60, help="tasks per text length")
    ap.add_argument("--model", default="smollm2-135m-instruct")
    ap.add_argument("--validate", type=int, default=40, help="tasks whose p is checked against sampled attempts")
    ap.add_argument("--validate-trials", type=int, default=16)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    shots = "".join(
        f"Question: {x['question']}\nAnswer: {x['answer']}\n\n"
        for x in list(gym_dataset("letter_counting", {"min_words": 1, "max_words": 3}, seed=999, size=3))
    )
    domain, engine = LetterCounting(shots), make_engine("hf", args.model)
    rows, start = [], time.monotonic()
    for words in args.words:
        data = gym_dataset("letter_counting", {"min_words": words, "max_words": words}, seed=words, size=args.tasks)
        tasks = [Task(domain="letter_counting", data={"question": x["question"], "answer": x["answer"]}) for x in data]
        for task, p in zip(tasks, solve_probabilities(domain, tasks, engine), strict=True):
            rows.append({"words": words, "answer": int(task.data["answer"]), "p": p, "task": task})
        print(f"{words} words: {args.tasks} tasks ({time.monotonic() - start:.0f}s)", flush=True)
    check = rows[:: max(1, len(rows) // args.validate)][: args.validate]  # spread over the text lengths
    spec = SamplingSpec(n=args.validate_trials, max_new_tokens=6, temperature=1.0, stop=["\n"])
    outs = engine.generate([domain.solver_prompt(r["task"]) for r in check], spec)
    for r, out in zip(check, outs, strict=True):
        r["sampled"] = sum(parse_number(c.text.strip().split("\n")[0]) == r["answer"] for c in out)
    diff = [r["sampled"] / args.validate_trials - r["p"] for r in check]
    ps, counts = [r["p"] for r in check], [r["sampled"] for r in check]
    validation = {
        "tasks": len(check),
        "mean_p": float(np.mean(ps)),
        "mean_sampled_rate": float(np.mean(counts)) / args.validate_trials,
        "difference": t_interval(diff).as_dict(),
        "pearson": float(np.corrcoef(ps, counts)[0, 1]),
    }
    for r in rows:
        r.pop("task")
    table = []
    for words in [*args.words, "all"]:
        sel = [r for r in rows if words == "all" or r["words"] == words]
        p = np.array([r["p"] for r in sel])
        hard, easy = (1 - p) ** N >= 0.5, binom.sf(BAND[1], N, p) >= 0.5
        table.append({
            "words": words, "tasks": len(sel), "mean_p": float(p.mean()), "too_hard": float(hard.mean()),
            "in_band": float((~hard & ~easy).mean()), "too_easy": float(easy.mean()),
            "mean_u": float(np.mean([band_utility(x, N, BAND) for x in p])),
        })  # fmt: skip
    summary = {"date": time.strftime("%Y-%m-%d"), "settings": {k: str(v) for k, v in vars(args).items()},
               "table": table, "validation": validation, "seconds": time.monotonic() - start}  # fmt: skip
    lines = [
        "# Can letter counting give the 135M solver a two-sided band? (solver-side pilot)", "",
        f"Measured {summary['date']}: `python experiments/letter_band/pilot.py` (reasoning-gym `letter_counting`, "
        f"{args.tasks} tasks per text length, exact solve probability by teacher forcing, band 1-3 of 8).", "",
        "| words | tasks | mean p | too hard | in band | too easy | mean band utility |",
        "|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    lines += [
        f"| {r['words']} | {r['tasks']} | {r['mean_p']:.3f} | {r['too_hard']:.2f} | {r['in_band']:.2f} | "
        f"{r['too_easy']:.2f} | {r['mean_u']:.3f} |"
        for r in table
    ]
    v, d = validation, validation["difference"]
    lines += [
        "",
        f"p checked against {args.validate_trials} sampled attempts on {v['tasks']} tasks spread over the lengths: "
        f"mean p {v['mean_p']:.3f}, sampled rate {v['mean_sampled_rate']:.3f}, difference {d['estimate']:+.3f} "
        f"[{d['low']:+.3f}, {d['high']:+.3f}], Pearson {v['pearson']:.2f}.",
    ]
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "summary.json").write_text(json.dumps({**summary, "rows": rows}, indent=1))
        (args.out / "report.md").write_text(report)
    return summary


if __name__ == "__main__":
    main()
