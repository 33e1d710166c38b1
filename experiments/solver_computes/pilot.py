"""Is there a domain where the bundled solver computes? The pilot gate of the decisive experiment's item 4.

PRE-REGISTERED GATE (written 2026-12-06 before any number below was computed): a candidate domain passes when, on
the base generator's strictly valid tasks,
1. the answer's value explains under 30% of the variance of the solver's exact solve probability ``p`` (eta squared
   of ``p`` over 10 quantile bins of the answer; answers with fewer distinct values use one bin per value);
2. under 10% of the tasks that passed the lenient rule are degenerate under the strict rule;
3. at least 20% of tasks fall in each of too easy (more than 3 of 8 trials solve), in the band (1-3) and too hard
   (0), counted as the mean over tasks of each outcome's exact probability at ``p``.

Candidates read from committed rows, no new generation: the math expression domain (the demo's,
``docs/experiments/probe_ranking/rows.csv``) and letter counting (``probe_ranking_letters``), both the base
generator's groups with exact ``p``. A candidate that needs new generation (code deduction, a reasoning-gym family
written by the generator) is listed with why it was not piloted.

    python experiments/solver_computes/pilot.py     # seconds -> pilot.json, pilot.md beside this file
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import binom

from propel.domains.letter_counting import LetterCountingDomain
from propel.domains.math.degeneracy import degenerate_reasons
from propel.domains.math.expression import evaluate
from propel.domains.math.expression_domain import MathExpressionDomain
from propel.records import Task

ROOT = Path(__file__).resolve().parents[2]
GATE = {"max_answer_eta2": 0.30, "max_degenerate": 0.10, "min_each_outcome": 0.20}


def eta_squared(p: np.ndarray, answers: np.ndarray) -> float:
    """Share of the variance of ``p`` between bins of the answer (one bin per value when there are few)."""
    values = np.unique(answers)
    if len(values) > 10:
        edges = np.unique(np.quantile(answers, np.linspace(0, 1, 11)))
        bins = np.clip(np.searchsorted(edges, answers, side="right") - 1, 0, len(edges) - 2)
    else:
        bins = np.searchsorted(values, answers)
    total = ((p - p.mean()) ** 2).sum()
    between = sum(((p[bins == b].mean() - p.mean()) ** 2) * (bins == b).sum() for b in np.unique(bins))
    return float(between / total) if total > 0 else float("nan")


def outcomes(p: np.ndarray, n: int = 8, band: tuple[int, int] = (1, 3)) -> dict[str, float]:
    lo, hi = band
    hard = binom.pmf(0, n, p)
    in_band = binom.cdf(hi, n, p) - binom.cdf(lo - 1, n, p)
    return {
        "too_hard": float(hard.mean()),
        "in_band": float(in_band.mean()),
        "too_easy": float((1 - hard - in_band).mean()),
    }


def candidate(name: str, rows: pd.DataFrame, degenerate: np.ndarray, answers: np.ndarray) -> dict:
    strict = ~degenerate
    p, a = rows["p"].to_numpy()[strict], answers[strict]
    result = {
        "tasks_lenient": int(len(rows)),
        "tasks_strict": int(strict.sum()),
        "degenerate_share": float(degenerate.mean()),
        "answer_eta2": eta_squared(p, a) if strict.sum() > 1 else None,
        **outcomes(p),
    }
    result["passes"] = bool(
        result["answer_eta2"] is not None
        and result["answer_eta2"] < GATE["max_answer_eta2"]
        and result["degenerate_share"] < GATE["max_degenerate"]
        and min(result["too_hard"], result["in_band"], result["too_easy"]) >= GATE["min_each_outcome"]
    )
    return {name: result}


def main() -> dict:
    out = {}
    math_rows = pd.read_csv(ROOT / "docs/experiments/probe_ranking/rows.csv")
    math_domain = MathExpressionDomain(solver_format="few_shot")
    deg = np.array([
        bool(degenerate_reasons(pr, ex, evaluate(ex), math_domain.solved_problems()))
        for pr, ex in zip(math_rows.problem, math_rows.expression, strict=True)
    ])  # fmt: skip
    out.update(candidate("math_expression", math_rows, deg, np.log1p(np.abs(math_rows.answer.to_numpy(float)))))
    letters = pd.read_csv(ROOT / "docs/experiments/probe_ranking_letters/rows.csv")
    domain = LetterCountingDomain()
    deg = np.array([
        domain.degeneracy(Task("letter_counting", {"letter": str(lt), "text": str(tx), "answer": int(an)})) is not None
        for lt, tx, an in zip(letters.letter, letters.text, letters.answer, strict=True)
    ])  # fmt: skip
    out.update(candidate("letter_counting", letters, deg, letters.answer.to_numpy(float)))
    not_piloted = {
        "code (deduction)": "the bundled generator wrote 1 parsable function in 64 (docs, ENVIRONMENT.md): no pool",
        "reasoning-gym families": "not generator domains in propel (they are solver-side task sources); a generator "
        "domain for one needs new generation runs, left for a session with the cores or a GPU",
    }
    summary = {"gate": GATE, "candidates": out, "not_piloted": not_piloted}
    here = Path(__file__).parent
    (here / "pilot.json").write_text(json.dumps(summary, indent=1))
    lines = ["| candidate | strict tasks | degenerate share | answer eta^2 | too hard | in band | too easy | passes |",
             "|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for name, r in out.items():
        lines.append(f"| {name} | {r['tasks_strict']} of {r['tasks_lenient']} | {r['degenerate_share']:.2f} | "
                     f"{r['answer_eta2']:.2f} | {r['too_hard']:.2f} | {r['in_band']:.2f} | {r['too_easy']:.2f} | "
                     f"{'yes' if r['passes'] else 'no'} |")  # fmt: skip
    lines += [""] + [f"- {k}: not piloted ({v})." for k, v in not_piloted.items()]
    (here / "pilot.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return summary


if __name__ == "__main__":
    main()
