"""What a pool says in numbers: valid rate and label balance (labeling), utility and diversity (evaluation)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from propel.domains.interface import DEGENERATE, is_degenerate
from propel.domains.trials import in_band


def pool_summary(frame, n_trials: int) -> dict:
    """Valid rate, solve-count histogram 0..n over valid tasks, share of positives among valid tasks, and the
    invalid tasks counted by reason (degenerate ones under ``degenerate:<why>``)."""
    valid = frame[frame["valid"].astype(bool)] if len(frame) else frame
    counts = [int(c) for c in valid["solve_count"]] if len(valid) else []
    hist = [counts.count(k) for k in range(n_trials + 1)]
    positives = int(sum(int(x) for x in valid["label"])) if len(valid) else 0
    reasons = invalid_reasons(frame["valid"], frame["reason"]) if len(frame) and "reason" in frame else {}
    return {
        "tasks": len(frame),
        "valid": len(valid),
        "valid_rate": len(valid) / len(frame) if len(frame) else 0.0,
        "degenerate": sum(n for r, n in reasons.items() if is_degenerate(r)),
        "solve_count_hist": hist,
        "positives": positives,
        "positive_share": positives / len(valid) if len(valid) else 0.0,
        "invalid_reasons": reasons,
    }


def invalid_reasons(valid: Sequence[bool], reasons: Sequence[str | None]) -> dict[str, int]:
    """How many invalid tasks each reason holds, most common first (degenerate ones as ``degenerate:<why>``)."""
    counts = Counter(str(r) for ok, r in zip(valid, reasons, strict=True) if not ok)
    return dict(counts.most_common())


RATES = {
    "valid_rate": ("valid", "tasks"),
    "valid_rate_lenient": ("valid_lenient", "tasks"),
    "utility": ("in_band", "tasks"),
    "utility_valid": ("in_band", "valid"),
    "top_topic_rate": ("top_topic_count", "tasks"),
    "top_topic_rate_valid": ("top_topic_count_valid", "valid"),
}
"""Each rate of an evaluation summary as (count key, total key): Wilson intervals, Newcombe for differences."""
MEANS = ("self_bleu_3", "self_bleu_3_valid")
"""Means of per-task scores (``diversity_scores``): bootstrap intervals, two-sample bootstrap for differences."""
CORPUS_RATIOS = ("distinct_3", "distinct_3_valid")
"""Corpus statistics: jackknife (normal) intervals, their differences by ``normal_difference``."""


def diversity_scores(valid: Sequence[bool], task_texts: Sequence[str | None]) -> dict[str, list[float]]:
    """Per-generation Self-BLEU-3 (each text against all the others), over all generations and over valid ones:
    what the Self-BLEU means and their bootstrap intervals are computed from. Lists are empty below 2 texts."""
    from propel.metrics.diversity import self_bleu_scores

    texts = [t or "" for t in task_texts]
    valid_texts = [t for t, ok in zip(texts, valid, strict=True) if ok]
    return {
        "self_bleu_3": self_bleu_scores(texts, 3).tolist() if len(texts) > 1 else [],
        "self_bleu_3_valid": self_bleu_scores(valid_texts, 3).tolist() if len(valid_texts) > 1 else [],
    }


def evaluation_summary(
    valid: Sequence[bool],
    solve_counts: Sequence[int | None],
    task_texts: Sequence[str | None],
    topics: Sequence[str | None],
    n_trials: int,
    band: tuple[int, int],
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
    scores: dict[str, list[float]] | None = None,
    task_metrics: Mapping[str, Sequence[float]] | None = None,
    exact_utility: Sequence[float] | None = None,
    reasons: Sequence[str | None] | None = None,
    exact_utility_lenient: Sequence[float] | None = None,
) -> dict:
    """Utility, validity, diversity and the solve-count histogram of one evaluation, each with its interval.

    The PROPEL paper's definitions (§5) keep their names: ``utility`` is the share of *all* fresh generations
    whose solve count lands in the band (an invalid task is not in it), and ``self_bleu_3``, ``distinct_3``,
    ``top_topic_rate`` are over all generations (a malformed one as its raw completion). The same numbers over
    valid tasks only carry a ``_valid`` suffix. A metric with no defined value (Self-BLEU of fewer than 2 texts,
    no known topic) is None, never 0.0. ``intervals`` holds ``[low, high]`` at ``confidence`` for each rate
    (Wilson) and each Self-BLEU mean (seeded percentile bootstrap, ``n_resamples``, conditional on the corpus:
    the per-text scores are resampled, not the texts, since repeating a text would raise its own Self-BLEU).
    Distinct-3, a corpus ratio that resampling texts would bias, gets a jackknife interval over the texts.

    One entry per generation in each sequence: the rendered task (or raw completion), its topic when known, its
    solve count when valid. ``scores``: ``diversity_scores`` of the same generations when computed already.
    ``task_metrics``: the domain's per-task numbers over valid tasks (``Domain.task_metrics``, e.g. SWE's diff size),
    each summarized as ``<name>_mean`` with a bootstrap interval like the Self-BLEU means. ``exact_utility``: per
    generation, a valid task's exact band utility ``P(lo <= Bin(n, p) <= hi)`` at the solver's teacher-forced ``p``
    and 0 for an invalid one (``exact_utility_values``): the expected ``utility`` without the trials' sampling noise,
    the endpoint the experiments use; its mean gets a bootstrap interval. ``valid`` is the domain's strict validity
    (degenerate tasks invalid), so ``exact_utility`` is the strict yield, the primary endpoint; with ``reasons``
    (each generation's invalid reason) the summary also counts invalid tasks by reason and gives the lenient valid
    rate (degenerate tasks counted valid), and ``exact_utility_lenient`` (degenerate tasks at their own exact band
    utility) is shown beside the strict one, labelled.
    """
    import numpy as np

    from propel.metrics.diversity import distinct_n, distinct_n_leave_one_out, top_topic_count, top_topic_rate
    from propel.metrics.intervals import bootstrap, jackknife, wilson

    rows = [i for i, ok in enumerate(valid) if ok]
    counts = [int(solve_counts[i]) for i in rows]
    texts = [t or "" for t in task_texts]
    valid_texts = [texts[i] for i in rows]
    valid_topics = [topics[i] for i in rows]
    hits = sum(in_band(c, band) for c in counts)
    scores = scores if scores is not None else diversity_scores(valid, task_texts)
    summary = {
        "tasks": len(valid),
        "valid": len(rows),
        "valid_rate": len(rows) / len(valid) if valid else None,
        "in_band": hits,
        "utility": hits / len(valid) if valid else None,
        "utility_valid": hits / len(rows) if rows else None,
        "self_bleu_3": _mean(scores["self_bleu_3"]),
        "distinct_3": distinct_n(texts, 3),
        "top_topic_rate": top_topic_rate(list(topics)),
        "top_topic_count": top_topic_count(list(topics)),
        "self_bleu_3_valid": _mean(scores["self_bleu_3_valid"]),
        "distinct_3_valid": distinct_n(valid_texts, 3),
        "top_topic_rate_valid": top_topic_rate(valid_topics),
        "top_topic_count_valid": top_topic_count(valid_topics),
        "solve_count_hist": [counts.count(k) for k in range(n_trials + 1)],
        "n_trials": n_trials,
        "band": list(band),
        "confidence": confidence,
    }
    if exact_utility is not None:
        summary["exact_utility"] = float(np.mean(exact_utility)) if len(exact_utility) else None
    if reasons is not None:
        from propel.domains.interface import lenient_valid

        by_reason = invalid_reasons(valid, reasons)
        summary["valid_lenient"] = sum(lenient_valid(v, r) for v, r in zip(valid, reasons, strict=True))
        summary["valid_rate_lenient"] = summary["valid_lenient"] / len(valid) if valid else None
        summary["degenerate"] = {r.removeprefix(DEGENERATE): n for r, n in by_reason.items() if is_degenerate(r)}
        summary["invalid_reasons"] = by_reason
    if exact_utility_lenient is not None:
        summary["exact_utility_lenient"] = float(np.mean(exact_utility_lenient)) if exact_utility_lenient else None
    per_task = {f"{name}_mean": list(values) for name, values in (task_metrics or {}).items()}
    summary.update({name: float(np.mean(values)) if values else None for name, values in per_task.items()})
    intervals = {}
    for name, (count, total) in RATES.items():
        if name not in summary:  # the lenient rate, when no reasons were given
            continue
        ci = wilson(summary[count], summary[total], confidence) if summary[name] is not None else None
        intervals[name] = [ci.low, ci.high] if ci is not None else None
    exact = {"exact_utility": list(exact_utility)} if exact_utility is not None else {}
    if exact_utility_lenient is not None:
        exact["exact_utility_lenient"] = list(exact_utility_lenient)
    for name, values in [*((n, scores[n]) for n in MEANS), *per_task.items(), *exact.items()]:
        ci = bootstrap(values, n_resamples=n_resamples, confidence=confidence, seed=seed)
        intervals[name] = [ci.low, ci.high] if ci is not None else None
    for name, corpus in (("distinct_3", texts), ("distinct_3_valid", valid_texts)):
        value = summary[name]
        ci = None if value is None else jackknife(value, distinct_n_leave_one_out(corpus, 3), confidence)
        intervals[name] = [ci.low, ci.high] if ci is not None else None
    summary["intervals"] = intervals
    return summary


def exact_utility_values(
    valid: Sequence[bool], exact_p: Sequence[float | None], n_trials: int, band: tuple[int, int]
) -> list[float] | None:
    """Per generation, a valid task's exact band utility at its teacher-forced solve probability and 0 for an invalid
    one; None when a valid task has no ``exact_p`` (its domain gives no answer text, or it was not computed)."""
    from propel.domains.exact_trials import band_utility

    out = []
    for ok, p in zip(valid, exact_p, strict=True):
        if not ok:
            out.append(0.0)
        elif p is None or p != p:
            return None
        else:
            out.append(band_utility(float(p), n_trials, band))
    return out


def _mean(values: Sequence[float]) -> float | None:
    return float(sum(values) / len(values)) if len(values) > 1 else None


def print_summary_table(summary: dict, title: str) -> None:
    """A metric/value table on the console (floats to 4 significant digits, ``[low, high]`` after a metric that has
    an interval in ``summary["intervals"]``)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value")
    intervals = summary.get("intervals") or {}
    for key, value in summary.items():
        if key == "intervals":
            continue
        text = f"{value:.4g}" if isinstance(value, float) else str(value)
        if intervals.get(key):
            low, high = intervals[key]
            text += f"  [{low:.3g}, {high:.3g}]"
        table.add_row(key, text)
    Console().print(table)
