"""How much of the committed PROPEL results the strict validity rule removes (issue 72, item 1's measurement).

Reads the committed per-sample rows of the arms experiments (``docs/experiments/propel_arms*/rows.csv``: policy,
context, the task's problem and expression, its exact band utility ``u``) and of the offline ranking experiments
(``probe_ranking*/rows.csv``), applies today's strict rule of each domain (``Domain.degeneracy`` through the
scorer's definitions) to every task that was valid under the rule of the day, and writes per policy: the share of
valid tasks each reason removes (first reason, and any reason), the yield before and after, and each arm's paired
contrast with the gate under both rules (mean over seeds with a 95% t interval).

    python experiments/strict_validity/audit.py            # -> experiments/strict_validity/audit.{json,md}
"""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from propel.domains.letter_counting import LetterCountingDomain
from propel.domains.math.degeneracy import REASONS, degenerate_reasons
from propel.domains.math.expression import ExpressionError, evaluate
from propel.domains.math.expression_domain import MathExpressionDomain
from propel.records import Task

ROOT = Path(__file__).resolve().parents[2]
ARMS = ("propel_arms_warm", "propel_arms")
RANKING = ("probe_ranking", "probe_ranking_letters")
LETTER_REASONS = LetterCountingDomain.degenerate_reasons


def math_reasons(problem, expression, domain: MathExpressionDomain) -> list[str]:
    """Every strict reason of one math row that was valid (empty: still valid)."""
    if not isinstance(problem, str) or not isinstance(expression, str):
        return []
    try:
        answer = evaluate(expression)
    except ExpressionError:
        return []
    return degenerate_reasons(problem, expression, answer, domain.solved_problems())


def letter_reasons(letter, text, answer, domain: LetterCountingDomain) -> list[str]:
    task = Task("letter_counting", {"letter": str(letter), "text": str(text), "answer": int(answer)})
    first = domain.degeneracy(task)
    return [first] if first else []


def t_interval(values) -> dict:
    v = np.asarray(values, dtype=float)
    mean = float(v.mean())
    if len(v) < 2:
        return {"mean": mean, "low": None, "high": None, "per_seed": v.tolist()}
    half = float(stats.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)))
    return {"mean": mean, "low": mean - half, "high": mean + half, "per_seed": v.tolist()}


def audit_arms(name: str, domain: MathExpressionDomain) -> dict:
    rows = pd.read_csv(ROOT / "docs/experiments" / name / "rows.csv")
    rows["reasons"] = [
        math_reasons(p, e, domain) if v else []
        for p, e, v in zip(rows.problem, rows.expression, rows.valid, strict=True)
    ]
    rows["strict_valid"] = rows.valid & (rows.reasons.str.len() == 0)
    rows["strict_yield"] = np.where(rows.strict_valid, rows["yield"], 0.0)
    policies = {}
    for policy, g in rows.groupby("policy", sort=False):
        valid = g[g.valid]
        first = Counter(r[0] for r in valid.reasons if r)
        anyr = Counter(x for r in valid.reasons for x in r)
        policies[policy] = {
            "samples": len(g),
            "valid_rate": float(g.valid.mean()),
            "strict_valid_rate": float(g.strict_valid.mean()),
            "yield": float(g["yield"].mean()),
            "strict_yield": float(g.strict_yield.mean()),
            "degenerate_share_of_valid": float((valid.reasons.str.len() > 0).mean()) if len(valid) else None,
            "first_reason_share_of_valid": {r: first[r] / max(len(valid), 1) for r in REASONS},
            "any_reason_share_of_valid": {r: anyr[r] / max(len(valid), 1) for r in REASONS},
            "utility_share_from_degenerate": float(
                g.loc[g.valid & ~g.strict_valid, "yield"].sum() / max(g["yield"].sum(), 1e-12)
            ),
        }
    contrasts = {}
    seeds = sorted({p.split("-")[0] for p in policies if "-" in p})
    arms = sorted({p.split("-", 1)[1] for p in policies if "-" in p})
    for arm in (a for a in arms if a != "gate"):
        for column in ("yield", "strict_yield"):
            diffs = [
                rows[rows.policy == f"{s}-{arm}"][column].mean() - rows[rows.policy == f"{s}-gate"][column].mean()
                for s in seeds
                if f"{s}-{arm}" in policies and f"{s}-gate" in policies
            ]
            contrasts[f"{arm}-gate ({column})"] = t_interval(diffs)
    return {"policies": policies, "contrasts": contrasts}


def audit_ranking(name: str) -> dict:
    rows = pd.read_csv(ROOT / "docs/experiments" / name / "rows.csv")
    if "expression" in rows:
        domain = MathExpressionDomain(solver_format="few_shot")
        reasons = [math_reasons(p, e, domain) for p, e in zip(rows.problem, rows.expression, strict=True)]
        names = REASONS
    else:
        domain = LetterCountingDomain()
        reasons = [letter_reasons(a, b, c, domain) for a, b, c in zip(rows.letter, rows.text, rows.answer, strict=True)]
        names = LETTER_REASONS
    first = Counter(r[0] for r in reasons if r)
    degenerate = np.array([bool(r) for r in reasons])
    return {
        "valid_tasks": len(rows),
        "degenerate_share": float(degenerate.mean()),
        "first_reason_share": {r: first[r] / len(rows) for r in names},
        "mean_u_degenerate": float(rows.u[degenerate].mean()) if degenerate.any() else None,
        "mean_u_strict": float(rows.u[~degenerate].mean()) if (~degenerate).any() else None,
    }


def markdown(result: dict) -> str:
    out = ["# How much of the committed PROPEL results the strict validity rule removes", ""]
    out.append("Generated by `python experiments/strict_validity/audit.py` from the committed rows; every share is of "
               "the tasks that were valid under the rule of the day (expression parses and evaluates).")  # fmt: skip
    for name, block in result["arms"].items():
        out += ["", f"## {name}: per policy", ""]
        out.append("| policy | valid | strict valid | degenerate share of valid | yield | strict yield | "
                   "utility from degenerate | " + " | ".join(REASONS) + " |")  # fmt: skip
        out.append("|---" * (7 + len(REASONS)) + "|")
        for policy, p in block["policies"].items():
            shares = " | ".join(f"{p['first_reason_share_of_valid'][r]:.2f}" for r in REASONS)
            out.append(
                f"| {policy} | {p['valid_rate']:.3f} | {p['strict_valid_rate']:.3f} | "
                f"{p['degenerate_share_of_valid']:.2f} | {p['yield']:.3f} | {p['strict_yield']:.3f} | "
                f"{p['utility_share_from_degenerate']:.2f} | {shares} |"
            )
        out += ["", f"## {name}: contrasts with the gate arm (mean over seeds, 95% t)", "", "| contrast | mean | 95% |"]
        out.append("|---|---|---|")
        for key, c in block["contrasts"].items():
            ci = f"[{c['low']:+.3f}, {c['high']:+.3f}]" if c["low"] is not None else "-"
            out.append(f"| {key} | {c['mean']:+.3f} | {ci} |")
    out += ["", "## Offline ranking rows (valid tasks of the base generator)", ""]
    out.append("| experiment | valid tasks | degenerate share | mean u, degenerate | mean u, strict | by reason |")
    out.append("|---|---|---|---|---|---|")
    for name, r in result["ranking"].items():
        reasons = ", ".join(f"{k} {v:.2f}" for k, v in r["first_reason_share"].items() if v)
        mu_d = f"{r['mean_u_degenerate']:.3f}" if r["mean_u_degenerate"] is not None else "-"
        out.append(f"| {name} | {r['valid_tasks']} | {r['degenerate_share']:.2f} | {mu_d} | "
                   f"{r['mean_u_strict']:.3f} | {reasons} |")  # fmt: skip
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=str(Path(__file__).parent))
    args = parser.parse_args(argv)
    domain = MathExpressionDomain(solver_format="few_shot", lenient_expression=True)
    result = {
        "arms": {name: audit_arms(name, domain) for name in ARMS},
        "ranking": {name: audit_ranking(name) for name in RANKING},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "audit.json").write_text(json.dumps(result, indent=1))
    (out / "audit.md").write_text(markdown(result))
    print(markdown(result))
    return result


if __name__ == "__main__":
    main()
