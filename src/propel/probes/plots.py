"""Probe plots as PNG: reliability diagram of one probe, sweep heatmap (layer x pooling) per arch and balance."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from torch import Tensor

from propel.metrics.calibration import reliability_bins


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_reliability(probs: Tensor, labels: Tensor, path: str | Path, n_bins: int = 10, title: str = "") -> Path:
    """Observed positive rate vs mean predicted probability per bin (bar width = bin), diagonal = calibrated."""
    plt = _pyplot()
    bins = reliability_bins(probs, labels, n_bins)
    filled = (bins.count[:n_bins] > 0).numpy()
    centers = ((bins.edges[:-1] + bins.edges[1:]) / 2).numpy()
    acc, conf = bins.accuracy[:n_bins].numpy(), bins.confidence[:n_bins].numpy()
    fig, ax = plt.subplots(figsize=(4.5, 4.5))
    ax.plot([0, 1], [0, 1], "--", color="gray", lw=1)
    ax.bar(centers[filled], acc[filled], width=1 / n_bins, edgecolor="k", alpha=0.7, label="observed")
    ax.plot(conf[filled], acc[filled], "o", color="C3", label="bin mean conf.")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="predicted probability", ylabel="positive rate")
    ax.set_title(f"{title} ECE={bins.ece:.3f}".strip())
    ax.legend(loc="upper left")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def plot_sweep_heatmap(table, path: str | Path, metric: str = "val_balanced_accuracy") -> Path:
    """One heatmap of ``metric`` over layer (rows) x pooling (columns) for each (arch, balance) facet."""
    plt = _pyplot()
    facets = list(table.groupby(["arch", "balance"], sort=True))
    fig, axes = plt.subplots(
        1, len(facets), figsize=(4 + 3.5 * len(facets), 1.5 + 0.4 * table["layer"].nunique()), squeeze=False
    )
    vmin, vmax = table[metric].min(), table[metric].max()
    for ax, ((arch, balance), sub) in zip(axes[0], facets, strict=True):
        grid = sub.pivot_table(index="layer", columns="pooling", values=metric, aggfunc="mean").sort_index()
        im = ax.imshow(grid.to_numpy(), aspect="auto", cmap="viridis", vmin=vmin, vmax=vmax)
        ax.set_xticks(range(grid.shape[1]), grid.columns, rotation=60, ha="right", fontsize=7)
        ax.set_yticks(range(grid.shape[0]), grid.index)
        ax.set(title=f"{arch} / {balance}", ylabel="layer")
        for (i, j), v in np.ndenumerate(grid.to_numpy()):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w")
    fig.colorbar(im, ax=axes[0].tolist(), label=metric)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path
