"""One run of a probe sweep: a (cell, seed, split) head initialised and trained, its record (validation and test
metrics before and after post-hoc calibration), and the logistic baseline's record beside it.

A run's head depends on its seed alone (init, shuffling, downsampling, dropout), so training the same run again, alone
or in another bank, gives the same weights: what the refit and the rivals' cross-fitted probes rely on.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from propel.metrics.calibration import calibrated_ece, expected_calibration_error, fit_logit_scaling
from propel.probes.bank import fit_bank
from propel.probes.classifier import ProbeClassifier
from propel.probes.data import LabeledRows
from propel.probes.heads import feature_stats
from propel.probes.splits import downsample, positive_weight
from propel.probes.sweep_spec import RUN_COLUMNS, SweepSpec, parse_key
from propel.probes.training import HeadFit


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


def baseline_run(x: Tensor, rows: LabeledRows, split, balance: str, seed: int) -> dict:
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


def run_record(job: tuple, rec: dict, seconds: float) -> dict:
    """A run's row of ``runs.csv`` (the fixed header; NaN where the run has no value)."""
    fold, key, balance, arch, seed = job
    layer, pooling = parse_key(key)
    cell = {"key": key, "layer": layer, "pooling": pooling, "arch": arch, "balance": balance}
    rec = {**cell, "seed": seed, "fold": fold, **rec, "seconds": seconds}
    extra = sorted(set(rec) - set(RUN_COLUMNS))
    if extra:
        raise ValueError(f"probe sweep: run columns {extra} are not in RUN_COLUMNS (runs.csv has a fixed header)")
    return {c: rec.get(c, float("nan")) for c in RUN_COLUMNS}


def job_of(rec: Mapping) -> tuple:
    """The job ``(fold, key, balance, arch, seed)`` (``_grid``'s tuple) a finished run's record comes from."""
    return int(rec["fold"]), rec["key"], rec["balance"], rec["arch"], int(rec["seed"])
