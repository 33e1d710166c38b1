"""Probe sweep: layers x poolings x architectures x balance, several seeds per cell, one results table.

All heads train in this process on cached features (no model reloads): every run of every feature block is a head
of one ``ProbeBank`` under one ``Trainer.fit`` (``propel.probes.bank``). Each run is appended to ``runs.csv`` the moment
its head stops, under one fixed header (``RUN_COLUMNS``); at the end the file is rewritten in the grid's order and
the per-cell means become ``sweep.csv``.
A rerun skips finished runs only when ``runs_meta.json`` shows they were made from the same features, labels, RVP
sample and training recipe (``resume_fingerprint``); otherwise the old ``runs.csv`` is set aside as
``runs.stale.csv`` and the sweep starts over, with a warning naming what changed.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
from lightning.pytorch import Callback
from torch import Tensor

from propel.cli import stops
from propel.durable import write_with
from propel.metrics.calibration import CALIBRATIONS, calibrated_ece, expected_calibration_error, fit_logit_scaling
from propel.metrics.classification import METRIC_NAMES
from propel.probes.bank import fit_bank
from propel.probes.classifier import ProbeClassifier
from propel.probes.data import LabeledRows
from propel.probes.gate import GateSpec, gated_reward, logit_quantiles
from propel.probes.heads import ARCHS, feature_stats
from propel.probes.selection import rvp, select_probe
from propel.probes.splits import BALANCES, downsample, make_split, outer_split, positive_weight
from propel.probes.training import HeadFit, LoopSpec

BASELINE_ARCH = "logreg_sklearn"
CELL = ["layer", "pooling", "arch", "balance"]
CALIBRATED = ("ece_calibrated", "ece_excess")
"""Per split: ECE after post-hoc calibration, and its excess over a calibrated probe's on as many rows."""
RUN_COLUMNS = [
    "key",
    *CELL,
    "seed",
    "fold",
    "epochs",
    "n_train",
    *(f"{split}_{name}" for split in ("val", "test") for name in (*METRIC_NAMES, "loss", *CALIBRATED)),
    "calibration_scale",
    "calibration_bias",
    "rvp_overall",
    "rvp_within",
    "seconds",
]
"""The fixed header of ``runs.csv``: every run (baseline rows too) is written against it, NaN where it has no value."""
RUNS_META = "runs_meta.json"
SELECTION_ONLY = ("archs", "balances", "seeds", "logistic_baseline", "num_threads", "max_ece", "tie_tolerance")
"""``SweepSpec`` fields that add runs or change selection but never change a finished run's numbers."""


@dataclass
class SweepSpec:
    """The grid and the training recipe (defaults: the PROPEL paper's probe recipe, App. 14: AdamW lr 1e-3, weight
    decay 1e-2, batch 64, up to 50 epochs, early-stopping patience 5)."""

    archs: Sequence[str] = ("linear", "mlp")
    """Head architectures (``linear``, ``mlp``, ``deep_mlp``)."""
    balances: Sequence[str] = ("downsample",)
    """Class-imbalance handling (``downsample``, ``weighted``, ``none``)."""
    seeds: Sequence[int] = (0, 1, 2)
    """Training seeds per cell (init, shuffling, downsampling); cell metrics are their mean."""
    split: str = "random"
    """``random`` 80/10/10, ``stratified_kfold`` (small pools) or ``group_kfold``. In the k-fold modes fold
    ``test_fold`` is the test set of every run and is never used for selection; validation rotates over the other
    ``n_folds - 1`` folds, and a cell's metrics are the mean over those runs and seeds."""
    n_folds: int = 5
    """Folds for ``stratified_kfold`` / ``group_kfold`` (>= 3: train, validation and the outer test fold)."""
    test_fold: int = 0
    """k-fold modes: the outer fold held out of every run and of selection (the held-out numbers' rows)."""
    split_seed: int = 0
    """Seed of the random / stratified split (fixed across training seeds)."""
    loop: LoopSpec = field(default_factory=LoopSpec)
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
    """Calibration limit for selection: validation ECE after post-hoc calibration beyond what a perfectly calibrated
    probe with the same probabilities shows on as many rows (``val_ece_excess``: ``val_ece_calibrated`` minus
    ``propel.metrics.calibration.calibrated_ece``). On a fold of ~30 rows the raw value of a calibrated, informative
    probe is about 0.2, so a raw limit would keep only near-constant probes."""
    calibration: str = "platt"
    """Post-hoc calibration fit on the validation fold: ``platt`` (scale and bias) or ``temperature`` (scale only);
    the table reports ECE before (``*_ece``) and after (``*_ece_calibrated``)."""
    tie_tolerance: float = 0.01
    """Balanced-accuracy gap within which RVP breaks the tie."""

    def __post_init__(self):
        bad = [a for a in self.archs if a not in ARCHS] + [b for b in self.balances if b not in BALANCES]
        if bad:
            raise ValueError(f"sweep: unknown arch/balance {bad}; archs from {ARCHS}, balances from {BALANCES}")
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"sweep: calibration must be one of {CALIBRATIONS}, got {self.calibration!r}")


@dataclass
class RVPSample:
    """Features of a fixed sample of the starting policy's generations, for RVP under the exact RL reward.

    ``gate`` is the GRPO run's ``ProbeReward`` gate (the pipeline copies the object), so the probe is selected on the
    reward the policy will be trained with.
    """

    features: Mapping[str, Tensor]
    """``feature_key -> [num_contexts * G, D]``, grouped by context (G consecutive rows per context)."""
    valid: Tensor
    """``[num_contexts * G]`` validity of each generation."""
    group_size: int
    """G, samples per context."""
    gate: GateSpec = field(default_factory=GateSpec)
    """The reward's gate; a None floor is each candidate's default floor (``default_floor`` of its logits on the
    training pool), as ``ProbeReward`` sets it."""

    def rewards(self, key: str, module, pool: Tensor | None = None) -> Tensor:
        """The RL reward of every generation under ``module``'s logits on feature block ``key``.

        ``pool``: the training pool's features, whose logits set the default floor when the gate has none.
        """
        with torch.no_grad():
            logits = module(self.features[key])
            if self.gate.mode == "soft_gate" and getattr(module, "calibration", None) is not None:
                logits = module.calibration.logits(logits)  # the soft gate reads calibrated probabilities
            quantiles = None if pool is None or self.gate.floor is not None else logit_quantiles(module(pool))
            floor = self.gate.floor_for([quantiles], ["sweep candidate"])
        return gated_reward(logits, self.valid, self.gate, floor)

    def score(self, key: str, module, pool: Tensor | None = None) -> tuple[float, float]:
        """``(overall, within)`` RVP of ``module`` on feature block ``key``."""
        return rvp(self.rewards(key, module, pool).reshape(-1, self.group_size))


@dataclass
class SweepResult:
    table: object  # pandas DataFrame, one row per cell
    runs: object  # pandas DataFrame, one row per (cell, seed, fold)
    selected: object  # pandas Series: the selected cell's row
    first_run: HeadFit | None = None
    """The selected cell's first run (first seed, first split) as this sweep trained it, which ``refit_selected``
    returns instead of training it again; None when a resumed sweep had trained it before."""


def parse_key(key: str) -> tuple[int, str]:
    layer, pooling = key[len("layer") :].split("/", 1)
    return int(layer), pooling


def _splits(rows: LabeledRows, config: SweepSpec):
    """Every ``(train, val, test)`` split of the sweep: one for ``random``; in the k-fold modes one per inner
    validation fold, all sharing the outer test fold ``config.test_fold`` (nested: selection never sees it)."""
    y = rows.labels.numpy().astype(int)
    if config.split == "random":
        return [make_split(y, rows.groups, split="random", seed=config.split_seed)]
    kw = {"split": config.split, "seed": config.split_seed, "n_folds": config.n_folds, "test_fold": config.test_fold}
    return [outer_split(y, rows.groups, **kw, inner=k) for k in range(config.n_folds - 1)]


def _hash(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, Tensor):
            part = part.detach().cpu().contiguous()
            digest.update(str((tuple(part.shape), str(part.dtype))).encode())
            digest.update(part.view(torch.uint8).numpy().tobytes() if part.numel() else b"")
        elif isinstance(part, np.ndarray):
            digest.update(np.ascontiguousarray(part).tobytes() if part.dtype != object else str(list(part)).encode())
        else:
            digest.update(json.dumps(part, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def resume_fingerprint(
    features: Mapping[str, Tensor],
    rows: LabeledRows,
    config: SweepSpec,
    rvp_sample: RVPSample | None = None,
    cache_key: str | None = None,
) -> dict[str, str]:
    """What a finished run's numbers depend on, as ``{part: hash}``: features (the activation cache key when given,
    else the tensors), labels (ids, labels, solve counts, groups), the training recipe and the RVP sample."""
    recipe = {k: v for k, v in asdict(config).items() if k not in SELECTION_ONLY}
    feats = cache_key if cache_key is not None else _hash(*(x for k in sorted(features) for x in (k, features[k])))
    groups = None if rows.groups is None else [str(g) for g in rows.groups]
    rvp_part = "none"
    if rvp_sample is not None:
        s = rvp_sample
        blocks = [x for k in sorted(s.features) for x in (k, s.features[k])]
        gate = s.gate
        rvp_part = _hash(gate.mode, gate.floor, list(gate.soft_clip), s.group_size, s.valid.float(), *blocks)
    return {
        "features": feats,
        "labels": _hash(rows.ids, rows.rows.astype(np.int64), rows.labels, rows.solve_counts, groups),
        "recipe": _hash(recipe),
        "rvp": rvp_part,
    }


def _resume_records(runs_path: Path, fingerprint: dict[str, str]) -> list[dict]:
    """Finished runs of ``runs_path`` when they match ``fingerprint`` and the fixed header; else set them aside."""
    import pandas as pd

    meta_path = runs_path.parent / RUNS_META
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    old = meta.get("fingerprint", {})
    changed = [part for part in fingerprint if old.get(part) != fingerprint[part]]
    columns = list(pd.read_csv(runs_path, nrows=0).columns)
    if columns != RUN_COLUMNS:
        changed.append("runs.csv header")
    if not changed:
        return pd.read_csv(runs_path).to_dict("records")
    warnings.warn(
        f"probe sweep: {runs_path} was made with other {', '.join(changed)}; starting over "
        f"(old runs kept as {runs_path.with_suffix('.stale.csv').name})",
        stacklevel=3,
    )
    runs_path.replace(runs_path.with_suffix(".stale.csv"))
    return []


def make_module(config: SweepSpec, arch: str, input_dim: int, pos_weight: float | None) -> ProbeClassifier:
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


def head_fit(x: Tensor, rows: LabeledRows, split, config: SweepSpec, arch: str, balance: str, seed: int) -> HeadFit:
    """One (cell, seed, split) run's head, initialised and ready to train: its balance applied to the training
    rows, its features standardized with their statistics, its init and random streams from ``seed``."""
    train, val, _ = split
    y = rows.labels
    if balance == "downsample":
        train = downsample(train, y.numpy().astype(int), seed=seed)
    pos_weight = positive_weight(y.numpy()[train]) if balance == "weighted" else None
    t_train = torch.as_tensor(train, dtype=torch.long)
    torch.manual_seed(seed)  # head init depends on the seed only, so a refit reproduces the run
    module = make_module(config, arch, x.shape[1], pos_weight)
    if config.standardize:
        module.head.set_normalization(*feature_stats(x[t_train]))
    return HeadFit(module, x, y, t_train, val, seed=seed, loop=config.loop)


def run_metrics(fit: HeadFit, rows: LabeledRows, split, config: SweepSpec, seed: int) -> dict:
    """A trained run's record: epochs, training rows, val/test metrics before and after post-hoc calibration (the
    calibration is fitted on the validation rows and kept on ``fit.module.calibration``)."""
    _, val, test = split
    module, x, y = fit.module, fit.x, rows.labels
    t_val, t_test = (torch.as_tensor(i, dtype=torch.long) for i in (val, test))
    out: dict = {"epochs": fit.epochs, "n_train": len(fit.train)}
    with torch.no_grad():
        module.calibration = fit_logit_scaling(module(x[t_val]), y[t_val], config.calibration)
        for name, t in (("val", t_val), ("test", t_test)):
            logits = module(x[t])
            metrics = module.metrics(logits, y[t], _solve(rows, t))
            out.update({f"{name}_{k}": v for k, v in metrics.items()})
            probs = module.calibration.probs(logits)
            out[f"{name}_ece_calibrated"] = expected_calibration_error(probs, y[t])
            out[f"{name}_ece_excess"] = out[f"{name}_ece_calibrated"] - calibrated_ece(probs, seed=seed)
    out["calibration_scale"], out["calibration_bias"] = module.calibration.scale, module.calibration.bias
    return out


def train_run(
    x: Tensor, rows: LabeledRows, split, config: SweepSpec, arch: str, balance: str, seed: int
) -> tuple[ProbeClassifier, dict]:
    """Train one (cell, seed, split) run (a bank of one head); returns the classifier and its val/test metrics."""
    fit = head_fit(x, rows, split, config, arch, balance, seed)
    fit_bank([fit])
    return fit.module, run_metrics(fit, rows, split, config, seed)


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


def _record(job: tuple, rec: dict, seconds: float) -> dict:
    """A run's row of ``runs.csv`` (the fixed header; NaN where the run has no value)."""
    fold, key, balance, arch, seed = job
    layer, pooling = parse_key(key)
    cell = {"key": key, "layer": layer, "pooling": pooling, "arch": arch, "balance": balance}
    rec = {**cell, "seed": seed, "fold": fold, **rec, "seconds": seconds}
    extra = sorted(set(rec) - set(RUN_COLUMNS))
    if extra:
        raise ValueError(f"probe sweep: run columns {extra} are not in RUN_COLUMNS (runs.csv has a fixed header)")
    return {c: rec.get(c, float("nan")) for c in RUN_COLUMNS}


def _job_of(rec: Mapping) -> tuple:
    """The job ``(fold, key, balance, arch, seed)`` (``_grid``'s tuple) a finished run's record comes from."""
    return int(rec["fold"]), rec["key"], rec["balance"], rec["arch"], int(rec["seed"])


def _grid(n_splits: int, features: Mapping[str, Tensor], config: SweepSpec) -> list[tuple]:
    """Every run of the sweep as ``(fold, key, balance, arch, seed)``, fold-major; the logistic baseline (when on)
    is deterministic, so it runs with the first seed only."""
    archs = list(config.archs) + ([BASELINE_ARCH] if config.logistic_baseline else [])
    return [
        (fold, key, balance, arch, seed)
        for fold in range(n_splits)
        for key in features
        for balance in config.balances
        for arch in archs
        for seed in (config.seeds[:1] if arch == BASELINE_ARCH else config.seeds)
    ]


@dataclass
class _SweepRun:
    """What every run of one sweep shares: the features, rows and splits it trains on, its recipe and RVP sample."""

    features: Mapping[str, Tensor]
    rows: LabeledRows
    splits: list
    config: SweepSpec
    rvp_sample: RVPSample | None


class _RunWriter(Callback):
    """Turns each head of a bank into its run record the moment the head stops (val/test metrics, calibration, RVP
    under the exact RL reward) and hands it to ``emit``, which appends it to ``runs.csv``."""

    def __init__(self, sweep: _SweepRun, jobs: list[tuple], fits: list[HeadFit], emit):
        self.sweep, self.jobs, self.fits, self.emit = sweep, jobs, fits, emit

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        for i in pl_module.finished:
            start = time.perf_counter()
            fold, key, _, _, seed = job = self.jobs[i]
            fit = self.fits[i]
            rec = run_metrics(fit, self.sweep.rows, self.sweep.splits[fold], self.sweep.config, seed)
            if self.sweep.rvp_sample is not None:
                rec["rvp_overall"], rec["rvp_within"] = self.sweep.rvp_sample.score(key, fit.module, pool=fit.x)
            self.emit(_record(job, rec, fit.seconds + time.perf_counter() - start))


class _Selection(Callback):
    """The sweep's last step, when the bank's fit ends: every run's record (this fit's and those a resumed sweep
    read back) in the grid's order, the per-cell table, the selected cell (``select_probe``: balanced accuracy
    under the calibration limit, RVP as tiebreak) and, when this fit trained it, the selected cell's first run."""

    def __init__(self, jobs: list[tuple], records: list[dict], config: SweepSpec):
        self.jobs, self.records, self.config = jobs, records, config
        self.heads: list[tuple] = []
        self.fits: list[HeadFit] = []
        self.result: SweepResult | None = None

    def on_fit_end(self, trainer, pl_module) -> None:
        self.select()

    def select(self) -> SweepResult:
        """The result (a sweep with nothing left to train calls this without a fit)."""
        import pandas as pd

        order = {job: i for i, job in enumerate(self.jobs)}  # heads finish in any order; the table reads the grid's
        self.records.sort(key=lambda r: order.get(_job_of(r), len(self.jobs)))
        runs = pd.DataFrame(self.records, columns=RUN_COLUMNS)
        table = summarize(runs)
        candidates = table[table["arch"] != BASELINE_ARCH]
        config = self.config
        selected = select_probe(candidates, max_ece=config.max_ece, tie_tolerance=config.tie_tolerance)
        first = (0, selected["key"], selected["balance"], selected["arch"], int(config.seeds[0]))
        fit = self.fits[self.heads.index(first)] if first in self.heads else None
        self.result = SweepResult(table=table, runs=runs, selected=selected, first_run=fit)
        return self.result


def _run_jobs(
    sweep: _SweepRun, todo: list[tuple], selection: _Selection, runs_path: Path | None, progress: bool
) -> SweepResult:
    """Run the jobs ``todo`` of the sweep (torch's thread count set to the config's meanwhile): the logistic
    baselines block by block, then every head of every feature block in one ``ProbeBank`` fit (a head's weights do
    not depend on the bank it shares), which ends with ``selection``. Each run's record is appended to
    ``selection.records`` and to ``runs_path`` as it finishes, so a killed sweep resumes."""
    import pandas as pd
    from rich.progress import Progress

    features, rows, config = sweep.features, sweep.rows, sweep.config
    records, total = selection.records, len(selection.jobs)
    threads = torch.get_num_threads()
    if config.num_threads:
        torch.set_num_threads(config.num_threads)
    try:
        with Progress(disable=not progress, transient=True) as bar:
            task = bar.add_task("probe sweep", total=total, completed=total - len(todo))

            def emit(rec: dict) -> None:
                records.append(rec)
                if runs_path is not None:
                    frame = pd.DataFrame([rec], columns=RUN_COLUMNS)
                    frame.to_csv(runs_path, mode="a", header=not runs_path.exists(), index=False)
                bar.advance(task)

            index = torch.as_tensor(rows.rows, dtype=torch.long)
            heads, fits = selection.heads, selection.fits
            for key in dict.fromkeys(job[1] for job in todo):
                x = features[key][index].float()
                block = [job for job in todo if job[1] == key]
                for job in (j for j in block if j[3] == BASELINE_ARCH):
                    start = time.perf_counter()
                    fold, _, balance, _, seed = job
                    rec = _baseline_run(x, rows, sweep.splits[fold], balance, seed)
                    emit(_record(job, rec, time.perf_counter() - start))
                for job in (j for j in block if j[3] != BASELINE_ARCH):
                    fold, _, balance, arch, seed = job
                    heads.append(job)
                    fits.append(head_fit(x, rows, sweep.splits[fold], config, arch, balance, seed))
            if not fits:  # nothing left to train (a resumed sweep, or baselines only): select without a fit
                return selection.select()
            fit_bank(fits, callbacks=[_RunWriter(sweep, heads, fits, emit), selection])
            return selection.result
    finally:
        torch.set_num_threads(threads)


def _report(table, out: Path | None, logger) -> None:
    """``sweep.csv`` and ``sweep_heatmap.png`` under ``out`` when given, and the table to ``logger`` when it logs
    tables."""
    if out is not None:
        table.to_csv(out / "sweep.csv", index=False)
        from propel.probes.plots import plot_sweep_heatmap

        plot_sweep_heatmap(table, out / "sweep_heatmap.png")
    if logger is not None and hasattr(logger, "log_table"):
        logger.log_table(key="probe_sweep", dataframe=table)


def run_sweep(
    features: Mapping[str, Tensor],
    rows: LabeledRows,
    config: SweepSpec | None = None,
    *,
    rvp_sample: RVPSample | None = None,
    out_dir: str | Path | None = None,
    logger=None,
    progress: bool = True,
    cache_key: str | None = None,
) -> SweepResult:
    """Train every cell of the grid over ``features`` (``feature_key -> [N_features, D]``) and select a probe.

    Args:
        features: feature blocks over all cached rows; ``rows.rows`` indexes into them.
        rows: labeled rows (``align_labels``).
        config: grid and recipe.
        rvp_sample: the starting policy's sample; adds ``rvp_overall``/``rvp_within`` (selection tiebreak).
        out_dir: where ``runs.csv`` (incremental, resumable), ``sweep.csv`` and ``sweep_heatmap.png`` go.
        logger: a Lightning logger; the table is logged with ``log_table`` when it has one.
        progress: show a rich progress bar.
        cache_key: the activation cache's key (folder name), used for ``features`` in the resume fingerprint
            instead of hashing the tensors.
    """
    config = config or SweepSpec()
    splits = _splits(rows, config)
    out = Path(out_dir) if out_dir is not None else None
    runs_path = out / "runs.csv" if out is not None else None
    records: list[dict] = []
    done: set[tuple] = set()
    if out is not None:
        fingerprint = resume_fingerprint(features, rows, config, rvp_sample, cache_key)
        if runs_path.exists():
            records = _resume_records(runs_path, fingerprint)  # called from here: its warning's stacklevel counts on it
            done = {_job_of(r) for r in records}
        out.mkdir(parents=True, exist_ok=True)
        (out / RUNS_META).write_text(json.dumps({"fingerprint": fingerprint, "columns": RUN_COLUMNS}, indent=1))
    jobs = _grid(len(splits), features, config)
    todo = [job for job in jobs if job not in done]
    if progress and 0 < len(todo) < len(jobs):
        print(
            f"probe sweep: resuming, {len(jobs) - len(todo)} of {len(jobs)} runs already in {runs_path}",
            file=sys.stderr,
        )
    selection = _Selection(jobs, records, config)
    try:
        result = _run_jobs(_SweepRun(features, rows, splits, config, rvp_sample), todo, selection, runs_path, progress)
    except KeyboardInterrupt:  # Ctrl-C or a stop signal: the command's last line says what is on disk
        if runs_path is not None:
            stops.note(f"the probe sweep holds {len(records)} of {len(jobs)} runs in {runs_path}", len(records) > 0)
        raise
    if runs_path is not None:  # in the grid's order, whole or not at all
        write_with(runs_path, lambda tmp: result.runs.to_csv(tmp, index=False))
    _report(result.table, out, logger)
    return result


def summarize(runs):
    """Per-cell means over seeds and folds, with the spread of validation balanced accuracy."""
    numeric = [c for c in runs.columns if c not in (*CELL, "key", "seed", "fold") and runs[c].dtype.kind in "fiu"]
    grouped = runs.groupby(CELL, sort=False)
    table = grouped[numeric].mean().reset_index()
    table["val_balanced_accuracy_std"] = grouped["val_balanced_accuracy"].std(ddof=0).to_numpy()
    table["n_runs"] = grouped.size().to_numpy()
    table.insert(0, "key", [f"layer{int(r.layer)}/{r.pooling}" for r in table.itertuples()])
    return table.sort_values("val_balanced_accuracy", ascending=False, ignore_index=True)


def refit_selected(features: Mapping[str, Tensor], rows: LabeledRows, result: SweepResult, config: SweepSpec):
    """The selected cell's run with its first seed on its first split: the sweep's own head when this sweep trained
    it (``result.first_run``), else trained again (training is deterministic per seed: the same weights either way).

    The run is fixed before any result is seen, not the cell's best-validation run: picking the luckiest seed or
    fold would bias the refit's numbers upward. Its test rows are the random split's test set, or in the k-fold
    modes the outer fold that no run trained, validated or was selected on. Returns ``(module, metrics)``
    (``metrics["fold"]``, ``metrics["seed"]``: the run reproduced); export it with ``module.to_artifact(...)``.
    """
    sel = result.selected
    seed, fold = int(config.seeds[0]), 0
    split = _splits(rows, config)[fold]
    if result.first_run is not None:  # the sweep trained this run: the same weights, bit for bit, without a fit
        fit = result.first_run
        return fit.module, {**run_metrics(fit, rows, split, config, seed), "fold": fold, "seed": seed}
    x = features[sel["key"]][torch.as_tensor(rows.rows, dtype=torch.long)].float()
    module, metrics = train_run(x, rows, split, config, sel["arch"], sel["balance"], seed)
    return module, {**metrics, "fold": fold, "seed": seed}


def split_indices(rows: LabeledRows, config: SweepSpec, fold: int = 0) -> tuple[np.ndarray, ...]:
    """The (train, val, test) indices the sweep used for ``fold`` (an inner fold in the k-fold modes)."""
    return _splits(rows, config)[fold]
