"""Probe sweep: layers x poolings x architectures x balance, several seeds per cell, one results table, one probe.

All heads train in this process on cached features (no model reloads): every run of every feature block is a head
of one ``ProbeBank`` under one ``Trainer.fit`` (``propel.probes.bank``). Two callbacks of that fit do the rest: each
run is appended to ``runs.csv`` the moment its head stops, under one fixed header (``RUN_COLUMNS``), and when the fit
ends the file is rewritten in the grid's order, the per-cell means become ``sweep.csv`` and the probe is selected.
What a sweep is: ``propel.probes.sweep_spec``; one run: ``propel.probes.sweep_run``; which finished runs a rerun
keeps: ``propel.probes.sweep_resume``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from lightning.pytorch import Callback
from torch import Tensor

from propel.cli import stops
from propel.durable import write_with
from propel.probes.bank import fit_bank
from propel.probes.data import LabeledRows
from propel.probes.selection import select_probe
from propel.probes.splits import make_split, outer_split
from propel.probes.sweep_resume import RUNS_META, resume_fingerprint, resume_records
from propel.probes.sweep_run import baseline_run, head_fit, job_of, run_metrics, run_record, train_run
from propel.probes.sweep_spec import BASELINE_ARCH, CELL, RUN_COLUMNS, RVPSample, SweepSpec
from propel.probes.training import HeadFit


@dataclass
class SweepResult:
    table: object  # pandas DataFrame, one row per cell
    runs: object  # pandas DataFrame, one row per (cell, seed, fold)
    selected: object  # pandas Series: the selected cell's row
    first_run: HeadFit | None = None
    """The selected cell's first run (first seed, first split) as this sweep trained it, which ``refit_selected``
    returns instead of training it again; None when a resumed sweep had trained it before."""


def _splits(rows: LabeledRows, config: SweepSpec):
    """Every ``(train, val, test)`` split of the sweep: one for ``random``; in the k-fold modes one per inner
    validation fold, all sharing the outer test fold ``config.test_fold`` (nested: selection never sees it)."""
    y = rows.labels.numpy().astype(int)
    if config.split == "random":
        return [make_split(y, rows.groups, split="random", seed=config.split_seed)]
    kw = {"split": config.split, "seed": config.split_seed, "n_folds": config.n_folds, "test_fold": config.test_fold}
    return [outer_split(y, rows.groups, **kw, inner=k) for k in range(config.n_folds - 1)]


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
            self.emit(run_record(job, rec, fit.seconds + time.perf_counter() - start))


class _Selection(Callback):
    """The sweep's last step, when the bank's fit ends: every run's record (this fit's and those a resumed sweep
    read back) in the grid's order, the per-cell table, the selected cell (``select_probe``: balanced accuracy
    under the calibration limit, RVP as tiebreak) and, when this fit trained it, the selected cell's first run."""

    def __init__(self, jobs: list[tuple], records: list[dict], config: SweepSpec, trained: Mapping[tuple, HeadFit]):
        self.jobs, self.records, self.config, self.trained = jobs, records, config, trained
        self.result: SweepResult | None = None

    def on_fit_end(self, trainer, pl_module) -> None:
        self.select()

    def select(self) -> SweepResult:
        """The result (a sweep with nothing left to train calls this without a fit)."""
        import pandas as pd

        order = {job: i for i, job in enumerate(self.jobs)}  # heads finish in any order; the table reads the grid's
        self.records.sort(key=lambda r: order.get(job_of(r), len(self.jobs)))
        runs = pd.DataFrame(self.records, columns=RUN_COLUMNS)
        table = summarize(runs)
        candidates = table[table["arch"] != BASELINE_ARCH]
        config = self.config
        selected = select_probe(candidates, max_ece=config.max_ece, tie_tolerance=config.tie_tolerance)
        first = (0, selected["key"], selected["balance"], selected["arch"], int(config.seeds[0]))
        self.result = SweepResult(table=table, runs=runs, selected=selected, first_run=self.trained.get(first))
        return self.result


def _run_jobs(
    sweep: _SweepRun, jobs: list[tuple], todo: list[tuple], records: list[dict], runs_path: Path | None, progress: bool
) -> SweepResult:
    """Run the jobs ``todo`` of the sweep's ``jobs`` (torch's thread count set to the config's meanwhile): the
    logistic baselines block by block, then every head of every feature block in one ``ProbeBank`` fit (a head's
    weights do not depend on the bank it shares), which ends with the selection (``_Selection``). Each run's record
    is appended to ``records`` and to ``runs_path`` as it finishes, so a killed sweep resumes."""
    import pandas as pd
    from rich.progress import Progress

    features, rows, config = sweep.features, sweep.rows, sweep.config
    total = len(jobs)
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
            heads, fits = [], []
            for key in dict.fromkeys(job[1] for job in todo):
                x = features[key][index].float()
                block = [job for job in todo if job[1] == key]
                for job in (j for j in block if j[3] == BASELINE_ARCH):
                    start = time.perf_counter()
                    fold, _, balance, _, seed = job
                    rec = baseline_run(x, rows, sweep.splits[fold], balance, seed)
                    emit(run_record(job, rec, time.perf_counter() - start))
                for job in (j for j in block if j[3] != BASELINE_ARCH):
                    fold, _, balance, arch, seed = job
                    heads.append(job)
                    fits.append(head_fit(x, rows, sweep.splits[fold], config, arch, balance, seed))
            selection = _Selection(jobs, records, config, dict(zip(heads, fits, strict=True)))
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
            records = resume_records(runs_path, fingerprint)  # called from here: its warning's stacklevel counts on it
            done = {job_of(r) for r in records}
        out.mkdir(parents=True, exist_ok=True)
        (out / RUNS_META).write_text(json.dumps({"fingerprint": fingerprint, "columns": RUN_COLUMNS}, indent=1))
    jobs = _grid(len(splits), features, config)
    todo = [job for job in jobs if job not in done]
    if progress and 0 < len(todo) < len(jobs):
        print(
            f"probe sweep: resuming, {len(jobs) - len(todo)} of {len(jobs)} runs already in {runs_path}",
            file=sys.stderr,
        )
    sweep = _SweepRun(features, rows, splits, config, rvp_sample)
    try:
        result = _run_jobs(sweep, jobs, todo, records, runs_path, progress)
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
