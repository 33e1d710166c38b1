"""Probe sweep: layers x poolings x architectures x balance, several seeds per cell, one results table.

All heads train in this process on cached features (no model reloads, no Trainer per cell), each run is appended
to ``runs.csv`` as it finishes (a rerun skips finished runs), and the per-cell means become ``sweep.csv``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from propel.probes.classifier import ProbeClassifier
from propel.probes.data import LabeledRows
from propel.probes.gate import check_gate, gated_reward
from propel.probes.heads import ARCHS, feature_stats
from propel.probes.selection import rvp, select_probe
from propel.probes.splits import BALANCES, downsample, make_split, positive_weight
from propel.probes.training import LoopSettings, fit_in_memory

BASELINE_ARCH = "logreg_sklearn"
CELL = ["layer", "pooling", "arch", "balance"]


@dataclass
class SweepConfig:
    """The grid and the training recipe (defaults: DESIGN.md / seed 004 App. 14)."""

    archs: Sequence[str] = ("linear", "mlp")
    """Head architectures (``linear``, ``mlp``, ``deep_mlp``)."""
    balances: Sequence[str] = ("downsample",)
    """Class-imbalance handling (``downsample``, ``weighted``, ``none``)."""
    seeds: Sequence[int] = (0, 1, 2)
    """Training seeds per cell (init, shuffling, downsampling); cell metrics are their mean."""
    split: str = "random"
    """``random`` 80/10/10, ``stratified_kfold`` (small pools: every row is held out once) or ``group_kfold``; in
    the k-fold modes every fold is run and a cell's metrics are the mean over folds and seeds."""
    n_folds: int = 5
    """Folds for ``stratified_kfold`` / ``group_kfold``."""
    split_seed: int = 0
    """Seed of the random / stratified split (fixed across training seeds)."""
    loop: LoopSettings = field(default_factory=LoopSettings)
    """Epochs, patience, batch size, early-stopping metric."""
    lr: float = 1e-3
    weight_decay: float = 1e-2
    hidden_dim: int = 256
    dropout: float = 0.1
    standardize: bool = True
    """Standardize features with train-split statistics."""
    logistic_baseline: bool = True
    """Add a scikit-learn logistic-regression row per (feature, balance) for comparison (never selected)."""
    num_threads: int | None = 1
    """torch intra-op threads while training (tiny heads run fastest on one thread; None leaves it as is)."""
    max_ece: float = 0.1
    """Calibration limit for selection (validation ECE)."""
    tie_tolerance: float = 0.01
    """Balanced-accuracy gap within which RVP breaks the tie."""

    def __post_init__(self):
        bad = [a for a in self.archs if a not in ARCHS] + [b for b in self.balances if b not in BALANCES]
        if bad:
            raise ValueError(f"sweep: unknown arch/balance {bad}; archs from {ARCHS}, balances from {BALANCES}")


@dataclass
class RVPSample:
    """Features of a fixed sample of base-policy generations, for RVP under the exact RL reward (``gated_reward``).

    Set ``mode``, ``invalid_penalty`` and ``soft_clip`` as the GRPO run's ``ProbeReward`` has them, so the probe is
    selected on the reward the policy will be trained with.
    """

    features: Mapping[str, Tensor]
    """``feature_key -> [num_contexts * G, D]``, grouped by context (G consecutive rows per context)."""
    valid: Tensor
    """``[num_contexts * G]`` validity of each generation."""
    group_size: int
    """G, samples per context."""
    invalid_penalty: float = -1.0
    """Reward of invalid generations (gated modes)."""
    mode: str = "hard_gate"
    """``hard_gate``, ``soft_gate`` or ``probe_only`` (``propel.probes.gate.PROBE_MODES``)."""
    soft_clip: tuple[float, float] = (0.0, 1.0)
    """(low, high) bounds of the soft-gate probability."""

    def __post_init__(self):
        self.soft_clip = check_gate(self.mode, self.soft_clip)

    def rewards(self, key: str, module) -> Tensor:
        """The RL reward of every generation under ``module``'s logits on feature block ``key``."""
        with torch.no_grad():
            logits = module(self.features[key])
        return gated_reward(logits, self.valid, self.mode, self.invalid_penalty, self.soft_clip)

    def score(self, key: str, module) -> tuple[float, float]:
        """``(overall, within)`` RVP of ``module`` on feature block ``key``."""
        return rvp(self.rewards(key, module).reshape(-1, self.group_size))


@dataclass
class SweepResult:
    table: object  # pandas DataFrame, one row per cell
    runs: object  # pandas DataFrame, one row per (cell, seed, fold)
    selected: object  # pandas Series: the selected cell's row


def parse_key(key: str) -> tuple[int, str]:
    layer, pooling = key[len("layer") :].split("/", 1)
    return int(layer), pooling


def _splits(rows: LabeledRows, config: SweepConfig):
    """Every ``(train, val, test)`` split of the sweep: one for ``random``, one per fold in the k-fold modes."""
    y = rows.labels.numpy().astype(int)
    folds = range(1) if config.split == "random" else range(config.n_folds)
    return [
        make_split(y, rows.groups, split=config.split, seed=config.split_seed, n_folds=config.n_folds, fold=k)
        for k in folds
    ]


def make_module(config: SweepConfig, arch: str, input_dim: int, pos_weight: float | None) -> ProbeClassifier:
    """A ``ProbeClassifier`` configured like the sweep cell (the single definition of head, loss and metrics)."""
    return ProbeClassifier(
        arch=arch,
        input_dim=input_dim,
        hidden_dim=config.hidden_dim,
        dropout=config.dropout,
        lr=config.lr,
        weight_decay=config.weight_decay,
        pos_weight=pos_weight,
    )


def train_run(
    x: Tensor, rows: LabeledRows, split, config: SweepConfig, arch: str, balance: str, seed: int
) -> tuple[ProbeClassifier, dict]:
    """Train one (cell, seed, split) run; returns the classifier and its val/test metrics."""
    train, val, test = split
    y = rows.labels
    if balance == "downsample":
        train = downsample(train, y.numpy().astype(int), seed=seed)
    pos_weight = positive_weight(y.numpy()[train]) if balance == "weighted" else None
    t_train, t_val, t_test = (torch.as_tensor(i, dtype=torch.long) for i in (train, val, test))
    torch.manual_seed(seed)  # head init depends on the seed only, so a refit reproduces the run
    module = make_module(config, arch, x.shape[1], pos_weight)
    if config.standardize:
        module.head.set_normalization(*feature_stats(x[t_train]))
    epochs = fit_in_memory(module, x[t_train], y[t_train], x[t_val], y[t_val], seed=seed, settings=config.loop)
    out: dict = {"epochs": epochs, "n_train": len(train)}
    with torch.no_grad():
        for name, t in (("val", t_val), ("test", t_test)):
            metrics = module.metrics(module(x[t]), y[t], _solve(rows, t))
            out.update({f"{name}_{k}": v for k, v in metrics.items()})
    return module, out


def _solve(rows: LabeledRows, t: Tensor) -> Tensor | None:
    s = rows.solve_counts[t]
    return None if torch.isnan(s).all() else s


def _baseline_run(x: Tensor, rows: LabeledRows, split, balance: str, seed: int) -> dict:
    from propel.probes.baseline import logistic_baseline

    train, val, test = split
    y = rows.labels
    if balance == "downsample":
        train = downsample(train, y.numpy().astype(int), seed=seed)
    t = {k: torch.as_tensor(v, dtype=torch.long) for k, v in (("train", train), ("val", val), ("test", test))}
    evals = {k: (x[t[k]], y[t[k]], _solve(rows, t[k])) for k in ("val", "test")}
    return {
        "epochs": 0,
        "n_train": len(train),
        **logistic_baseline(x[t["train"]], y[t["train"]], evals, balance=balance),
    }


def _one_run(x, key, rows, split, config, arch, balance, seed, fold, rvp_sample) -> dict:
    start = time.perf_counter()
    if arch == BASELINE_ARCH:
        rec = _baseline_run(x, rows, split, balance, seed)
    else:
        module, rec = train_run(x, rows, split, config, arch, balance, seed)
        if rvp_sample is not None:
            rec["rvp_overall"], rec["rvp_within"] = rvp_sample.score(key, module)
    layer, pooling = parse_key(key)
    cell = {"key": key, "layer": layer, "pooling": pooling, "arch": arch, "balance": balance}
    return {**cell, "seed": seed, "fold": fold, **rec, "seconds": time.perf_counter() - start}


def run_sweep(
    features: Mapping[str, Tensor],
    rows: LabeledRows,
    config: SweepConfig | None = None,
    *,
    rvp_sample: RVPSample | None = None,
    out_dir: str | Path | None = None,
    logger=None,
    progress: bool = True,
) -> SweepResult:
    """Train every cell of the grid over ``features`` (``feature_key -> [N_features, D]``) and select a probe.

    Args:
        features: feature blocks over all cached rows; ``rows.rows`` indexes into them.
        rows: labeled rows (``align_labels``).
        config: grid and recipe.
        rvp_sample: base-policy generations' features; adds ``rvp_overall``/``rvp_within`` (selection tiebreak).
        out_dir: where ``runs.csv`` (incremental, resumable), ``sweep.csv`` and ``sweep_heatmap.png`` go.
        logger: a Lightning logger; the table is logged with ``log_table`` when it has one.
        progress: show a rich progress bar.
    """
    import pandas as pd
    from rich.progress import Progress

    config = config or SweepConfig()
    splits = _splits(rows, config)
    out = Path(out_dir) if out_dir is not None else None
    runs_path = out / "runs.csv" if out is not None else None
    records: list[dict] = []
    done: set[tuple] = set()
    if runs_path is not None and runs_path.exists():
        records = pd.read_csv(runs_path).to_dict("records")
        done = {(r["key"], r["arch"], r["balance"], int(r["seed"]), int(r["fold"])) for r in records}
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    archs = list(config.archs) + ([BASELINE_ARCH] if config.logistic_baseline else [])
    jobs = [
        (fold, key, balance, arch, seed)
        for fold in range(len(splits))
        for key in features
        for balance in config.balances
        for arch in archs
        for seed in (config.seeds[:1] if arch == BASELINE_ARCH else config.seeds)
    ]
    threads = torch.get_num_threads()
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    try:
        with Progress(disable=not progress, transient=True) as bar:
            task = bar.add_task("probe sweep", total=len(jobs))
            index = torch.as_tensor(rows.rows, dtype=torch.long)
            x_key, x = None, None
            for fold, key, balance, arch, seed in jobs:
                if (key, arch, balance, seed, fold) not in done:
                    if key != x_key:
                        x_key, x = key, features[key][index].float()
                    rec = _one_run(x, key, rows, splits[fold], config, arch, balance, seed, fold, rvp_sample)
                    records.append(rec)
                    if runs_path is not None:
                        pd.DataFrame([rec]).to_csv(runs_path, mode="a", header=not runs_path.exists(), index=False)
                bar.advance(task)
    finally:
        torch.set_num_threads(threads)
    runs = pd.DataFrame(records)
    table = summarize(runs)
    candidates = table[table["arch"] != BASELINE_ARCH]
    selected = select_probe(candidates, max_ece=config.max_ece, tie_tolerance=config.tie_tolerance)
    if out is not None:
        table.to_csv(out / "sweep.csv", index=False)
        from propel.probes.plots import plot_sweep_heatmap

        plot_sweep_heatmap(table, out / "sweep_heatmap.png")
    if logger is not None and hasattr(logger, "log_table"):
        logger.log_table(key="probe_sweep", dataframe=table)
    return SweepResult(table=table, runs=runs, selected=selected)


def summarize(runs):
    """Per-cell means over seeds and folds, with the spread of validation balanced accuracy."""
    numeric = [c for c in runs.columns if c not in (*CELL, "key", "seed", "fold") and runs[c].dtype.kind in "fiu"]
    grouped = runs.groupby(CELL, sort=False)
    table = grouped[numeric].mean().reset_index()
    table["val_balanced_accuracy_std"] = grouped["val_balanced_accuracy"].std(ddof=0).to_numpy()
    table["n_runs"] = grouped.size().to_numpy()
    table.insert(0, "key", [f"layer{int(r.layer)}/{r.pooling}" for r in table.itertuples()])
    return table.sort_values("val_balanced_accuracy", ascending=False, ignore_index=True)


def refit_selected(features: Mapping[str, Tensor], rows: LabeledRows, result: SweepResult, config: SweepConfig):
    """Retrain the selected cell with its best run's seed and fold (training is deterministic per seed).

    Returns ``(module, metrics)`` (``metrics["fold"]``: the fold whose test rows the module never saw); export it
    with ``module.to_artifact(...)``.
    """
    sel = result.selected
    runs = result.runs
    cell = runs[(runs["key"] == sel["key"]) & (runs["arch"] == sel["arch"]) & (runs["balance"] == sel["balance"])]
    best = cell.loc[cell["val_balanced_accuracy"].idxmax()]
    x = features[sel["key"]][torch.as_tensor(rows.rows, dtype=torch.long)].float()
    split = _splits(rows, config)[int(best["fold"])]
    module, metrics = train_run(x, rows, split, config, sel["arch"], sel["balance"], int(best["seed"]))
    return module, {**metrics, "fold": int(best["fold"])}


def split_indices(rows: LabeledRows, config: SweepConfig, fold: int = 0) -> tuple[np.ndarray, ...]:
    """The (train, val, test) indices the sweep used for ``fold``."""
    return _splits(rows, config)[fold]
