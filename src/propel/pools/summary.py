"""What a pool says in numbers: valid rate and label balance (labeling), utility and diversity (evaluation)."""

from __future__ import annotations

from collections.abc import Sequence

from propel.domains.trials import in_band


def pool_summary(frame, n_trials: int) -> dict:
    """Valid rate, solve-count histogram 0..n over valid tasks, and share of positives among valid tasks."""
    valid = frame[frame["valid"].astype(bool)] if len(frame) else frame
    counts = [int(c) for c in valid["solve_count"]] if len(valid) else []
    hist = [counts.count(k) for k in range(n_trials + 1)]
    positives = int(sum(int(x) for x in valid["label"])) if len(valid) else 0
    return {
        "tasks": len(frame),
        "valid": len(valid),
        "valid_rate": len(valid) / len(frame) if len(frame) else 0.0,
        "solve_count_hist": hist,
        "positives": positives,
        "positive_share": positives / len(valid) if len(valid) else 0.0,
    }


def evaluation_summary(
    valid: Sequence[bool],
    solve_counts: Sequence[int | None],
    task_texts: Sequence[str | None],
    topics: Sequence[str | None],
    n_trials: int,
    band: tuple[int, int],
) -> dict:
    """Utility (share of valid tasks in band; ``utility_all``: of all generations), validity, diversity, histogram.

    One entry per generation in each sequence; solve counts, texts and topics are read for valid ones only.
    """
    from propel.metrics.diversity import distinct_n, self_bleu, top_topic_rate

    rows = [i for i, ok in enumerate(valid) if ok]
    counts = [int(solve_counts[i]) for i in rows]
    texts = [task_texts[i] or "" for i in rows]
    hits = sum(in_band(c, band) for c in counts)
    return {
        "tasks": len(valid),
        "valid": len(rows),
        "valid_rate": len(rows) / len(valid) if valid else 0.0,
        "in_band": hits,
        "utility": hits / len(rows) if rows else 0.0,
        "utility_all": hits / len(valid) if valid else 0.0,
        "self_bleu_3": self_bleu(texts, 3) if len(texts) > 1 else 0.0,
        "distinct_3": distinct_n(texts, 3) if texts else 0.0,
        "top_topic_rate": top_topic_rate([topics[i] for i in rows]) if rows else 0.0,
        "solve_count_hist": [counts.count(k) for k in range(n_trials + 1)],
        "n_trials": n_trials,
        "band": list(band),
    }


def print_summary_table(summary: dict, title: str) -> None:
    """A metric/value table on the console (floats to 4 significant digits)."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value")
    for key, value in summary.items():
        table.add_row(key, f"{value:.4g}" if isinstance(value, float) else str(value))
    Console().print(table)
