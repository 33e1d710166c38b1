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
    fig, ax = plt.subplots(figsize=(5, 5.2))
    ax.plot([0, 1], [0, 1], "--", color="gray", lw=1)
    ax.bar(centers[filled], acc[filled], width=1 / n_bins, edgecolor="k", alpha=0.7, label="observed")
    ax.plot(conf[filled], acc[filled], "o", color="C3", label="bin mean conf.")
    ax.set(xlim=(0, 1), ylim=(0, 1), xlabel="predicted probability", ylabel="positive rate")
    ax.set_title("\n".join(filter(None, [title, f"ECE = {bins.ece:.3f}"])), fontsize=10, wrap=True)
    ax.legend(loc="upper left")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")  # a long title is never clipped
    plt.close(fig)
    return path


def plot_sweep_heatmap(table, path: str | Path, metric: str = "val_balanced_accuracy") -> Path:
    """One heatmap of ``metric`` over layer (rows) x pooling (columns) for each (arch, balance) facet."""
    plt = _pyplot()
    facets = list(table.groupby(["arch", "balance"], sort=True))
    n_layers, n_poolings = table["layer"].nunique(), table["pooling"].nunique()
    fig, axes = plt.subplots(
        1,
        len(facets),
        figsize=(1.5 + (1.2 + 0.9 * n_poolings) * len(facets), 2.2 + 0.55 * n_layers),
        squeeze=False,
        sharey=True,
        layout="constrained",  # tick labels never run into the next panel
    )
    vmin, vmax = table[metric].min(), table[metric].max()
    cmap = plt.get_cmap("viridis")
    for k, (ax, ((arch, balance), sub)) in enumerate(zip(axes[0], facets, strict=True)):
        grid = sub.pivot_table(index="layer", columns="pooling", values=metric, aggfunc="mean").sort_index()
        im = ax.imshow(grid.to_numpy(), aspect="auto", cmap=cmap, vmin=vmin, vmax=vmax)
        ax.set_xticks(range(grid.shape[1]), grid.columns, rotation=40, ha="right", fontsize=9)
        ax.set_yticks(range(grid.shape[0]), grid.index, fontsize=9)
        ax.set_title(f"{arch} / {balance}", fontsize=10)
        if k == 0:
            ax.set_ylabel("layer")
        for (i, j), v in np.ndenumerate(grid.to_numpy()):
            shade = (v - vmin) / (vmax - vmin) if vmax > vmin else 0.5
            r, g, b, _ = cmap(shade)
            ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "white"  # contrast with the cell
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=10, color=ink, fontweight="bold")
    fig.colorbar(im, ax=axes[0].tolist(), label=metric)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path
