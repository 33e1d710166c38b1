"""Why the probe sweep trains its heads as one ``ProbeBank`` under one Lightning ``fit``: the same heads, data and
early-stopping rule, fitted three ways, alternating, with the time per head and the demo sweep's projected cost (its
head count: layers x poolings x archs x balances x seeds x validation folds):

- ``plain_loop``: the PyTorch loop that defines a head's training, no Lightning (``propel.testing.probe_reference``);
- ``trainer_per_head``: one ``Trainer.fit`` of ``ProbeModule`` per head (Lightning's ``EarlyStopping``);
- ``bank_per_head``: one ``fit_bank`` per head (a bank of one: the same per-fit setup, the bank's loop);
- ``bank``: every head in one ``fit_bank`` (what the sweep does per feature block).

The bank's heads are also checked against the plain loop and the banks of one: the same weights, bit for bit.

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

from propel.cli.quiet import quiet_dependencies
from propel.lit_modules.probe_training import ProbeModule
from propel.probes.bank import fit_bank
from propel.probes.classifier import ProbeClassifier
from propel.probes.training import HeadFit, LoopSpec
from propel.testing.probe_reference import reference_fit

DEMO_FITS = 4 * 3 * 2 * 2 * 3 * 4
"""The demo's sweep: 4 layers x 3 poolings x 2 archs x 2 balances x 3 seeds x 4 validation folds."""


def _data(rows: int, dim: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, dim, generator=g)
    y = ((x[:, 0] + 0.5 * torch.randn(rows, generator=g)) > 1.0).float()
    cut = int(rows * 0.8)
    return x, y, torch.arange(cut), torch.arange(cut, rows)


def fit_trainer(x, y, train, val, loop: LoopSpec, seed: int) -> None:
    torch.manual_seed(seed)
    module = ProbeModule(arch="linear", input_dim=x.shape[1], standardize=False)
    trainer = Trainer(
        max_epochs=loop.max_epochs,
        callbacks=[EarlyStopping("val/balanced_accuracy", mode="max", patience=loop.patience)],
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, accelerator="cpu", devices=1,
    )  # fmt: skip
    loaders = DataLoader(TensorDataset(x[train], y[train]), batch_size=loop.batch_size, shuffle=True)
    trainer.fit(module, loaders, DataLoader(TensorDataset(x[val], y[val]), batch_size=len(val)))


def _head(x, y, train, val, loop: LoopSpec, seed: int) -> HeadFit:
    torch.manual_seed(seed)
    return HeadFit(ProbeClassifier("linear", x.shape[1]), x, y, train, val, seed=seed, loop=loop)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fits", type=int, default=8, help="heads per way")
    ap.add_argument("--rows", type=int, default=240)
    ap.add_argument("--dim", type=int, default=576, help="the bundled model's hidden size")
    ap.add_argument("--repeats", type=int, default=3, help="alternating rounds of the three ways")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore")
    quiet_dependencies()
    torch.set_num_threads(1)  # as the sweep trains
    data, loop = _data(args.rows, args.dim), LoopSpec()
    times: dict[str, list[float]] = {"plain_loop": [], "trainer_per_head": [], "bank_per_head": [], "bank": []}
    for _ in range(args.repeats):
        start, plain = time.perf_counter(), []
        for seed in range(args.fits):
            torch.manual_seed(seed)
            plain.append(ProbeClassifier("linear", args.dim))
            reference_fit(plain[-1], *data, seed, loop)
        times["plain_loop"].append((time.perf_counter() - start) / args.fits)
        start = time.perf_counter()
        for seed in range(args.fits):
            fit_trainer(*data, loop, seed)
        times["trainer_per_head"].append((time.perf_counter() - start) / args.fits)
        start = time.perf_counter()
        alone = [fit_bank([_head(*data, loop, seed)]).fits[0] for seed in range(args.fits)]
        times["bank_per_head"].append((time.perf_counter() - start) / args.fits)
        start = time.perf_counter()
        together = fit_bank([_head(*data, loop, seed) for seed in range(args.fits)]).fits
        times["bank"].append((time.perf_counter() - start) / args.fits)
        for a, b, ref in zip(alone, together, plain, strict=True):
            pairs = [*zip(a.module.state_dict().values(), b.module.state_dict().values(), strict=True)]
            pairs += zip(ref.state_dict().values(), b.module.state_dict().values(), strict=True)
            if not all(torch.equal(p, q) for p, q in pairs) or a.epochs != b.epochs:
                raise SystemExit("a head trained in the bank differs from the plain loop or from a bank of one")
    out = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'way':>16} | median s per head | demo sweep ({DEMO_FITS} heads)")
    for k, v in out.items():
        print(f"{k:>16} | {v:17.4f} | {v * DEMO_FITS / 60:.2f} min")
    print(
        f"trainer_per_head / bank: {out['trainer_per_head'] / out['bank']:.1f}x, bank / plain_loop: "
        f"{out['bank'] / out['plain_loop']:.2f}x ({args.fits} heads per way, {args.repeats} alternating rounds; the "
        "bank's heads equal the plain loop's and the banks of one bit for bit)"
    )
    return out


if __name__ == "__main__":
    main()
