"""Why the probe sweep trains its heads in memory and not one Lightning ``fit`` each: the same head, data and
early-stopping rule, fitted by ``ProbeModule`` under a ``Trainer`` and by ``propel.probes.training.fit_in_memory``,
alternating, with the per-fit time and the demo sweep's projected cost (its fit count: layers x poolings x archs x
balances x seeds x validation folds).

    python benchmarks/probe_fit_overhead.py            # a minute or two on 2 CPU cores
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import torch
from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import EarlyStopping
from torch.utils.data import DataLoader, TensorDataset

from propel.lit_modules.probe_training import ProbeModule
from propel.probes.classifier import ProbeClassifier
from propel.probes.training import LoopSpec, fit_in_memory

DEMO_FITS = 4 * 3 * 2 * 2 * 3 * 4
"""The demo's sweep: 4 layers x 3 poolings x 2 archs x 2 balances x 3 seeds x 4 validation folds."""


def _data(rows: int, dim: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, dim, generator=g)
    y = ((x[:, 0] + 0.5 * torch.randn(rows, generator=g)) > 1.0).float()
    cut = int(rows * 0.8)
    return x[:cut], y[:cut], x[cut:], y[cut:]


def fit_trainer(x_tr, y_tr, x_va, y_va, loop: LoopSpec, seed: int) -> int:
    torch.manual_seed(seed)
    module = ProbeModule(arch="linear", input_dim=x_tr.shape[1], standardize=False)
    trainer = Trainer(
        max_epochs=loop.max_epochs,
        callbacks=[EarlyStopping("val/balanced_accuracy", mode="max", patience=loop.patience)],
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, accelerator="cpu", devices=1,
    )  # fmt: skip
    train = DataLoader(TensorDataset(x_tr, y_tr), batch_size=loop.batch_size, shuffle=True)
    val = DataLoader(TensorDataset(x_va, y_va), batch_size=len(y_va))
    trainer.fit(module, train, val)
    return trainer.current_epoch


def fit_memory(x_tr, y_tr, x_va, y_va, loop: LoopSpec, seed: int) -> int:
    module = ProbeClassifier("linear", x_tr.shape[1])
    return fit_in_memory(module, x_tr, y_tr, x_va, y_va, seed=seed, loop=loop)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fits", type=int, default=8, help="fits per way")
    ap.add_argument("--rows", type=int, default=240)
    ap.add_argument("--dim", type=int, default=576, help="the bundled model's hidden size")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)  # as the sweep trains
    data, loop = _data(args.rows, args.dim), LoopSpec()
    times = {"trainer": [], "in_memory": []}
    for i in range(args.fits):
        for name, fit in (("trainer", fit_trainer), ("in_memory", fit_memory)):
            start = time.perf_counter()
            fit(*data, loop, seed=i)
            times[name].append(time.perf_counter() - start)
    out = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'way':>10} | median s per fit | demo sweep ({DEMO_FITS} fits)")
    for k, v in out.items():
        print(f"{k:>10} | {v:16.3f} | {v * DEMO_FITS / 60:.1f} min")
    print(f"ratio trainer / in_memory: {out['trainer'] / out['in_memory']:.1f}x ({args.fits} fits each, alternating)")
    return out


if __name__ == "__main__":
    main()
