"""Two evaluation summaries side by side (base vs trained), each number with its interval, and the change
trained - base with the interval of the change and whether it is distinguishable from zero.

python -m propel.pipeline.compare runs/eval/math/base runs/eval/math/trained runs/eval/math

Rates (validity, utility, top-topic share) change by Newcombe's interval from the two counts; the Self-BLEU means
by a two-sample bootstrap of the per-generation scores each evaluation wrote to ``scores.json`` (without that file
the change has no interval); Distinct-3 by the two jackknife intervals in quadrature (``normal_difference``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from propel.lit_modules.evaluation import SCORES, SUMMARY
from propel.metrics.intervals import Interval, bootstrap_difference, describe_change, newcombe, normal_difference
from propel.pipeline.report import markdown_table, plot_histograms
from propel.pipeline.signal_cost import COLUMNS as COST_COLUMNS
from propel.pools.summary import CORPUS_RATIOS, MEANS, RATES

COMPARED = (
    "tasks",
    "exact_utility",
    "exact_utility_lenient",
    "valid_rate",
    "valid_rate_lenient",
    "utility",
    "utility_valid",
    "self_bleu_3",
    "distinct_3",
    "top_topic_rate",
    "self_bleu_3_valid",
    "distinct_3_valid",
    "top_topic_rate_valid",
    "solve_count_hist",
)
"""The metrics of the comparison table, in order: the strict yield first (the primary endpoint), the lenient one
beside it, then the paper's definitions and their valid-only variants."""
HEADLINE = ("exact_utility", "exact_utility_lenient", "valid_rate", "utility")
"""The changes the verdict states in words."""
NAMES = {
    "valid_rate": "validity (strict: degenerate tasks invalid)",
    "valid_rate_lenient": "lenient validity (degenerate tasks counted valid)",
    "exact_utility_lenient": "lenient yield (exact utility with degenerate tasks scored as valid)",
    "utility": "utility (in-band share of all generations)",
    "utility_valid": "utility among valid tasks",
    "exact_utility": "strict yield (exact utility: a valid task's in-band chance at the solver's exact solve rate; 0 "
    "if invalid or degenerate)",
    "top_topic_rate": "top-topic rate",
    "top_topic_rate_valid": "top-topic rate among valid tasks",
    "self_bleu_3": "Self-BLEU-3",
    "self_bleu_3_valid": "Self-BLEU-3 among valid tasks",
    "distinct_3": "Distinct-3",
    "distinct_3_valid": "Distinct-3 among valid tasks",
}


def _count(summary: Mapping, key: str) -> int | None:
    value = summary.get(key)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def lift(
    base: Mapping,
    trained: Mapping,
    base_scores: Mapping | None = None,
    trained_scores: Mapping | None = None,
    n_resamples: int = 2000,
    seed: int = 0,
) -> dict[str, dict]:
    """trained - base of every rate and Self-BLEU mean with its interval (at the summaries' confidence): one
    ``{"estimate", "low", "high", "confidence", "distinguishable", "words"}`` per metric that both define."""
    confidence = float(base.get("confidence") or trained.get("confidence") or 0.95)
    out: dict[str, dict] = {}
    for name, (count, total) in RATES.items():
        counts = [_count(s, k) for s in (trained, base) for k in (count, total)]
        if None in counts or trained.get(name) is None or base.get(name) is None:
            continue
        out[name] = _entry(name, newcombe(*counts, confidence=confidence))
    task_means = [k for k in (trained_scores or {}) if k not in MEANS]  # the domain's per-task metrics
    for name in [*MEANS, *task_means]:
        new, old = (trained_scores or {}).get(name), (base_scores or {}).get(name)
        if new and old:
            ci = bootstrap_difference(new, old, n_resamples=n_resamples, confidence=confidence, seed=seed)
            out[name] = _entry(name, ci)
    for name in CORPUS_RATIOS:
        new, old = _interval(trained, name), _interval(base, name)  # jackknife: symmetric
        if new is not None and old is not None:
            out[name] = _entry(name, normal_difference(new, old))
    return out


def _interval(summary: Mapping, name: str) -> Interval | None:
    """A summary's number ``name`` with its interval (None when it has none: an undefined value, an older summary)."""
    value, bounds = summary.get(name), (summary.get("intervals") or {}).get(name)
    if not isinstance(value, float) or not bounds:
        return None
    return Interval(value, bounds[0], bounds[1], float(summary.get("confidence") or 0.95))


def _entry(name: str, ci: Interval | None) -> dict:
    if ci is None:
        return {"words": describe_change(NAMES.get(name, name), None)}
    return {**ci.as_dict(), "distinguishable": ci.excludes_zero, "words": describe_change(NAMES.get(name, name), ci)}


def _with_interval(summary: Mapping, key: str):
    ci = _interval(summary, key)
    return summary.get(key) if ci is None else f"{ci.estimate:.3g} [{ci.low:.3g}, {ci.high:.3g}]"


def compare(
    base: Mapping,
    trained: Mapping,
    output_dir: str | Path | None = None,
    names: tuple[str, str] = ("base", "trained"),
    base_scores: Mapping | None = None,
    trained_scores: Mapping | None = None,
    costs: Mapping[str, Mapping | None] | None = None,
) -> str:
    """Markdown table of two evaluation summaries side by side (values with their intervals) and the change with
    its interval, then the headline changes in words, then what each policy's training signal cost (``costs``: per
    policy name, ``propel.pipeline.signal_cost.signal_cost``; a policy without an entry was not trained); with
    ``output_dir`` also writes ``compare.md``, ``lift.json`` and ``solve_counts.png`` (the two solve-count
    histograms) there."""
    changes = lift(base, trained, base_scores, trained_scores)
    pct = round(100 * float(base.get("confidence") or 0.95))
    rows = []
    task_means = [k for k in trained if k.endswith("_mean") and k in base]  # the domain's per-task metrics
    for key in [*COMPARED, *task_means]:
        if key not in base and key not in trained:  # e.g. exact utility, where the domain gives no answer text
            continue
        row = {"metric": key, names[0]: _with_interval(base, key), names[1]: _with_interval(trained, key)}
        if key in changes and "estimate" in changes[key]:
            c = changes[key]
            row[f"change [{pct}% interval]"] = f"{c['estimate']:+.3g} [{c['low']:+.3g}, {c['high']:+.3g}]"
        rows.append(row)
    table = markdown_table(rows, ["metric", *names, f"change [{pct}% interval]"])
    words = [changes[k]["words"] for k in (*HEADLINE, *[k for k in changes if k not in HEADLINE]) if k in changes]
    text = table + "\n" + "".join(f"- {w}\n" for w in words)
    if costs:
        text += "\n" + cost_table(costs, names)
    if output_dir is not None:
        out = Path(output_dir)
        out.mkdir(parents=True, exist_ok=True)
        (out / "compare.md").write_text(text)
        (out / "lift.json").write_text(json.dumps(changes, indent=1))
        hists = {names[0]: base["solve_count_hist"], names[1]: trained["solve_count_hist"]}
        plot_histograms(hists, out / "solve_counts.png", title=f"solve count of {base.get('n_trials', '')} trials")
    return text


def cost_table(costs: Mapping[str, Mapping | None], names: tuple[str, ...]) -> str:
    """One row per policy: its signal cost per task and solver trials online/offline ("-" for a policy that was
    not trained, "n/a" for a figure its run did not log)."""

    def cell(cost: Mapping | None, key: str) -> str:
        if cost is None:
            return "-"
        value = cost.get(key)
        return "n/a" if value is None else (f"{value:.3g}" if isinstance(value, float) else str(value))

    rows = [{"policy": n, **{label: cell(costs.get(n), k) for k, label in COST_COLUMNS.items()}} for n in names]
    return markdown_table(rows, ["policy", *COST_COLUMNS.values()])


def _read(folder: Path, name: str) -> dict | None:
    path = folder / name
    return json.loads(path.read_text()) if path.exists() else None


def compare_dirs(
    base_dir: str | Path,
    trained_dir: str | Path,
    output_dir: str | Path,
    costs: Mapping[str, Mapping | None] | None = None,
    names: tuple[str, str] = ("base", "trained"),
) -> str:
    """``compare`` of the ``summary.json`` (and ``scores.json``) files two ``propel test`` runs wrote (``names``:
    the two policies' column names)."""
    base_dir, trained_dir = Path(base_dir), Path(trained_dir)
    base, trained = _read(base_dir, SUMMARY), _read(trained_dir, SUMMARY)
    if base is None or trained is None:
        missing = base_dir if base is None else trained_dir
        raise FileNotFoundError(f"{missing / SUMMARY} does not exist: run `propel test` into {missing} first")
    return compare(
        base,
        trained,
        output_dir,
        names=names,
        base_scores=_read(base_dir, SCORES),
        trained_scores=_read(trained_dir, SCORES),
        costs=costs,
    )


# ------------------------------------------------------------------------------ several arms (co-evolution)
ARM_COLUMNS = ("utility", "valid_rate", "self_bleu_3", "distinct_3", "top_topic_rate")
"""The PROPEL paper's columns for an arms table (Table 8): utility, validity, Self-BLEU-3, Distinct-3, top-topic."""
ARM_PAIRS = (("single", "base"), ("constrained", "base"), ("constrained", "single"), ("auxiliary", "base"))
"""The changes an arms table states: each trained arm against the base, and the constraint against one probe."""


def arms_table(summaries: Mapping[str, Mapping], topics: Mapping[str, str | None] | None = None) -> str:
    """Markdown table: one row per arm (evaluation summary), the paper's columns with their intervals, the number of
    tasks and, with ``topics``, the arm's most common topic by name."""
    pct = round(100 * float(next(iter(summaries.values()), {}).get("confidence") or 0.95)) if summaries else 95
    rows = []
    for arm, summary in summaries.items():
        row = {"arm": arm, "tasks": summary.get("tasks")}
        row.update({key: _with_interval(summary, key) for key in ARM_COLUMNS})
        if topics is not None:
            row["top topic"] = topics.get(arm)
        rows.append(row)
    columns = ["arm", "tasks", *ARM_COLUMNS, *(["top topic"] if topics is not None else [])]
    return f"Values with {pct}% intervals.\n\n" + markdown_table(rows, columns)


def arms_lift(arms: Mapping[str, tuple[Mapping, Mapping | None]]) -> dict[str, dict[str, dict]]:
    """``lift`` for every pair of ``ARM_PAIRS`` whose arms are both present, keyed ``"new - old"``; ``arms`` maps an
    arm to its evaluation summary and per-generation scores (``scores.json``, or None)."""
    out = {}
    for new, old in ARM_PAIRS:
        if new in arms and old in arms:
            (n_sum, n_scores), (o_sum, o_scores) = arms[new], arms[old]
            out[f"{new} - {old}"] = lift(o_sum, n_sum, o_scores, n_scores)
    return out


def arms_lift_table(lifts: Mapping[str, Mapping[str, dict]]) -> str:
    """Markdown table of ``arms_lift``: one row per pair, each column the change with its interval."""
    rows = []
    for pair, changes in lifts.items():
        row = {"change": pair}
        for key in ARM_COLUMNS:
            c = changes.get(key) or {}
            row[key] = f"{c['estimate']:+.3g} [{c['low']:+.3g}, {c['high']:+.3g}]" if "estimate" in c else None
        rows.append(row)
    return markdown_table(rows, ["change", *ARM_COLUMNS])


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 4:
        raise SystemExit("usage: python -m propel.pipeline.compare BASE_EVAL_DIR TRAINED_EVAL_DIR OUTPUT_DIR")
    print(compare_dirs(*sys.argv[1:]))
