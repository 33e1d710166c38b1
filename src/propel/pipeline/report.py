"""The pipeline's report: one markdown table per stage plus PNG plots, from the numbers each stage wrote."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_fmt(v) for v in value) + "]"
    return "" if value is None else str(value)


def markdown_table(rows: Sequence[Mapping], columns: Sequence[str] | None = None) -> str:
    """A GitHub-flavoured markdown table; columns default to the keys of the first row."""
    if not rows:
        return "_(no rows)_\n"
    columns = list(columns or rows[0].keys())
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_fmt(row.get(c)) for c in columns) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def key_value_table(values: Mapping) -> str:
    """A two-column metric/value table."""
    return markdown_table([{"metric": k, "value": v} for k, v in values.items()])


def plot_histograms(histograms: Mapping[str, Sequence[int]], path: Path, title: str = "solve count") -> Path:
    """Side-by-side bars of solve-count histograms (e.g. base vs trained), as shares of tasks."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, ax = plt.subplots(figsize=(6, 3.5))
    width = 0.8 / max(len(histograms), 1)
    for i, (name, counts) in enumerate(histograms.items()):
        counts = np.asarray(counts, dtype=float)
        share = counts / max(counts.sum(), 1.0)
        ax.bar(np.arange(len(counts)) + i * width, share, width=width, label=f"{name} (n={int(counts.sum())})")
    ax.set_xlabel(title)
    ax.set_ylabel("share of valid tasks")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_curves(curves: Mapping[str, Sequence[float]], path: Path, xlabel: str = "step") -> Path:
    """One panel per named curve (reward, KL, ...)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(len(curves), 1), figsize=(4 * max(len(curves), 1), 3.2), squeeze=False)
    for ax, (name, values) in zip(axes[0], curves.items(), strict=False):
        ax.plot(range(len(values)), values, marker="o", markersize=3)
        ax.set_title(name)
        ax.set_xlabel(xlabel)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_series(panels: Mapping[str, Mapping[str, Sequence[Sequence[float]]]], path: Path, xlabel: str = "x") -> Path:
    """One panel per metric, one line per series of ``[x, y]`` points (e.g. top-topic share per step, per arm)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, max(len(panels), 1), figsize=(4.5 * max(len(panels), 1), 3.2), squeeze=False)
    for ax, (title, series) in zip(axes[0], panels.items(), strict=False):
        for label, points in series.items():
            if points:
                ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", markersize=3, label=label)
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        if any(series.values()):
            ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_report(path: Path, title: str, sections: Sequence[tuple[str, str]], notes: Sequence[str] = ()) -> Path:
    """Write ``report.md``: a title, free-text notes, then each (heading, markdown body) section."""
    parts = [f"# {title}\n"]
    parts += [f"{note}\n" for note in notes]
    for heading, body in sections:
        parts.append(f"## {heading}\n\n{body}")
    path.write_text("\n".join(parts))
    return path
