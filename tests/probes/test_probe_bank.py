"""ProbeBank: many heads under one Trainer.fit, each equal bit for bit to the plain loop that defines its training,
whatever it shares the bank with; heads leave as they stop; a sweep killed inside a bank keeps its finished runs."""

import os
import signal

import pandas as pd
import pytest
import torch
from lightning.pytorch import Callback

import propel.probes.sweep as sweep_module
from propel.cli import stops
from propel.probes.bank import ProbeBank, fit_bank
from propel.probes.classifier import ProbeClassifier
from propel.probes.data import align_labels
from propel.probes.sweep import run_sweep
from propel.probes.sweep_spec import SweepSpec
from propel.probes.training import HeadFit, LoopSpec
from propel.testing.probe_data import synthetic_probe_data
from propel.testing.probe_reference import reference_fit


def _data(n=240, d=16):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(n, d, generator=g)
    y = ((x[:, 0] + 0.7 * torch.randn(n, generator=g)) > 0.3).float()
    return x, y


def _heads(x, y, specs, loop, lr=1e-3):
    """One head per ``(arch, seed, train, val)``, initialised under its seed (as the sweep does)."""
    fits = []
    for arch, seed, train, val in specs:
        torch.manual_seed(seed)
        fits.append(HeadFit(ProbeClassifier(arch, x.shape[1], lr=lr), x, y, train, val, seed=seed, loop=loop))
    return fits


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values(), strict=True))


SPECS = [
    ("linear", 0, torch.arange(0, 160), torch.arange(160, 200)),
    ("mlp", 1, torch.arange(40, 200), torch.arange(0, 40)),
    ("mlp", 2, torch.arange(0, 120), torch.arange(200, 240)),
    ("linear", 3, torch.arange(80, 240), torch.arange(0, 80)),
]


@pytest.mark.parametrize("monitor", ["balanced_accuracy", "loss"])
def test_each_head_of_a_bank_equals_the_reference_loop_bit_for_bit(monitor):
    x, y = _data()
    loop = LoopSpec(max_epochs=25, patience=3, batch_size=32, monitor=monitor)
    bank = fit_bank(_heads(x, y, SPECS, loop, lr=1e-2))  # a fast lr: the validation loss turns, heads stop early
    epochs = []
    for fit, (arch, seed, train, val) in zip(bank.fits, SPECS, strict=True):
        torch.manual_seed(seed)
        ref = ProbeClassifier(arch, x.shape[1], lr=1e-2)
        epochs.append(reference_fit(ref, x, y, train, val, seed, loop))
        assert fit.done and fit.epochs == epochs[-1]
        assert _same_weights(fit.module, ref), f"{arch} seed {seed}"
    assert len(set(epochs)) > 1  # the heads stopped at different epochs: the bank ran some after others left


def test_a_head_does_not_depend_on_its_companions_or_their_order():
    x, y = _data()
    loop = LoopSpec(max_epochs=20, patience=4, batch_size=16)
    alone = [fit_bank(_heads(x, y, [spec], loop)).fits[0] for spec in SPECS]
    shuffled = fit_bank(_heads(x, y, SPECS[::-1], loop)).fits[::-1]
    for a, b in zip(alone, shuffled, strict=True):
        assert a.epochs == b.epochs and _same_weights(a.module, b.module)


def test_heads_leave_the_bank_once_as_they_stop_and_the_fit_ends_with_the_last():
    x, y = _data()
    loop = LoopSpec(max_epochs=40, patience=2, batch_size=32)
    seen: list[tuple[int, int]] = []

    class Watch(Callback):
        def on_train_epoch_end(self, trainer, pl_module):
            seen.extend((trainer.current_epoch, i) for i in pl_module.finished)

    fits = _heads(x, y, SPECS, loop)
    rng = torch.get_rng_state()
    bank = fit_bank(fits, callbacks=[Watch()])
    assert sorted(i for _, i in seen) == [0, 1, 2, 3]  # each head once
    for epoch, i in seen:
        assert fits[i].epochs == epoch + 1  # reported in the epoch it stopped
    assert bank.trainer.current_epoch == max(f.epochs for f in fits) < loop.max_epochs
    assert torch.equal(torch.get_rng_state(), rng)  # the heads' dropout streams are their own, not the caller's


def test_a_head_at_max_epochs_stops_with_its_best_epoch_restored():
    x, y = _data()
    loop = LoopSpec(max_epochs=3, patience=50, batch_size=64, monitor="loss")
    (fit,) = fit_bank(_heads(x, y, SPECS[:1], loop)).fits
    torch.manual_seed(0)
    ref = ProbeClassifier("linear", x.shape[1])
    assert reference_fit(ref, x, y, SPECS[0][2], SPECS[0][3], 0, loop) == fit.epochs == 3
    assert _same_weights(fit.module, ref) and not fit.module.training


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="monitor"):
        LoopSpec(monitor="auroc")
    with pytest.raises(ValueError, match="max_epochs"):
        LoopSpec(max_epochs=0)
    with pytest.raises(ValueError, match="at least one head"):
        ProbeBank([])


def test_a_sweep_killed_inside_a_bank_keeps_the_finished_runs_and_resumes_to_the_same_table(
    tmp_path, monkeypatch, capsys
):
    ids, features, pool = synthetic_probe_data(n=300)
    rows = align_labels(ids, pool)
    config = SweepSpec(archs=("linear", "mlp"), seeds=(0, 1), loop=LoopSpec(max_epochs=8), logistic_baseline=False)
    fresh = run_sweep(features, rows, config, progress=False)

    written = []
    real = sweep_module.run_metrics
    stops.reset()

    def dies_at_the_fifth(*args, **kwargs):  # Ctrl-C while the bank's fifth head is being recorded
        if len(written) == 4:
            os.kill(os.getpid(), signal.SIGINT)
        written.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(sweep_module, "run_metrics", dies_at_the_fifth)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's Ctrl-C (a pytest-xdist worker's
    try:  # own may ignore SIGINT)
        with pytest.raises(KeyboardInterrupt):
            run_sweep(features, rows, config, out_dir=tmp_path, progress=False)
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # Lightning did not leave it ignored
    finally:
        signal.signal(signal.SIGINT, previous)
    assert len(pd.read_csv(tmp_path / "runs.csv")) == 4  # every head that stopped before the kill is on disk
    assert stops.notes[-1] == stops.Note(f"the probe sweep holds 4 of 8 runs in {tmp_path / 'runs.csv'}", True)
    stops.reset()

    monkeypatch.setattr(sweep_module, "run_metrics", real)
    resumed = run_sweep(features, rows, config, out_dir=tmp_path, progress=True)
    assert f"probe sweep: resuming, 4 of 8 runs already in {tmp_path / 'runs.csv'}" in capsys.readouterr().err
    pd.testing.assert_frame_equal(resumed.runs.drop(columns="seconds"), fresh.runs.drop(columns="seconds"))
    on_disk = pd.read_csv(tmp_path / "runs.csv")  # rewritten in the grid's order at the end
    pd.testing.assert_frame_equal(
        on_disk.drop(columns="seconds"), fresh.runs.drop(columns="seconds"), check_dtype=False
    )


def test_a_sweep_over_several_feature_blocks_is_one_fit_and_equals_a_bank_per_block(monkeypatch):
    """Every head of every feature block trains under one ``Trainer.fit``; its runs equal those of one bank per
    block (what the sweep ran before 2026-12-07), since no head depends on its companions."""
    ids, features, pool = synthetic_probe_data(n=300)
    assert len(features) > 1
    rows = align_labels(ids, pool)
    config = SweepSpec(archs=("linear", "mlp"), seeds=(0, 1), loop=LoopSpec(max_epochs=8), logistic_baseline=False)
    banks = []
    real = sweep_module.fit_bank
    monkeypatch.setattr(
        sweep_module, "fit_bank", lambda fits, callbacks=(): banks.append(len(fits)) or real(fits, callbacks)
    )
    together = run_sweep(features, rows, config, progress=False)
    assert banks == [len(together.runs)]  # one fit, every run a head of it
    per_block = [run_sweep({key: x}, rows, config, progress=False).runs for key, x in features.items()]
    expected = pd.concat(per_block).sort_values(["fold", "key", "balance", "arch", "seed"], ignore_index=True)
    got = together.runs.sort_values(["fold", "key", "balance", "arch", "seed"], ignore_index=True)
    pd.testing.assert_frame_equal(got.drop(columns="seconds"), expected.drop(columns="seconds"))
