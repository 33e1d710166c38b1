"""Sweep end to end: synthetic features (grid, seeds, RVP, selection, resume, plots) and tiny model over texts."""

import pandas as pd
import pytest
import torch

from propel.probes.artifact import ProbeArtifact, ProbeScorer
from propel.probes.cache import extract_to_cache
from propel.probes.data import align_labels
from propel.probes.extraction import ActivationExtractor
from propel.probes.sweep import BASELINE_ARCH, RVPSample, SweepConfig, refit_selected, run_sweep
from propel.probes.synthetic import rvp_features, synthetic_probe_data
from propel.probes.training import LoopSettings


def small_config(**kw):
    kw = {"seeds": (0, 1), "loop": LoopSettings(max_epochs=15), "max_ece": 0.3, **kw}
    return SweepConfig(**kw)


def test_synthetic_sweep_selects_informative_features(tmp_path):
    ids, features, pool = synthetic_probe_data(n=1500)
    rows = align_labels(ids, pool)
    rvp_feats, valid = rvp_features(features, contexts=4, group_size=4)
    config = small_config(balances=("downsample", "weighted"))
    result = run_sweep(
        features, rows, config, rvp_sample=RVPSample(rvp_feats, valid, group_size=4), out_dir=tmp_path, progress=False
    )
    table = result.table
    # 2 keys x (2 archs + baseline) x 2 balances
    assert len(table) == 12 and set(table["arch"]) == {"linear", "mlp", BASELINE_ARCH}
    assert (table[table["arch"] != BASELINE_ARCH]["n_runs"] == 2).all()
    assert {"val_balanced_accuracy", "test_auroc", "val_ece", "rvp_overall", "rvp_within", "test_spearman"} <= set(
        table.columns
    )
    assert result.selected["key"] == "layer1/mean_full" and result.selected["arch"] != BASELINE_ARCH
    signal = table[table["key"] == "layer1/mean_full"]
    noise = table[table["key"] == "layer2/last_token"]
    assert signal["test_balanced_accuracy"].min() > 0.7 and noise["test_balanced_accuracy"].max() < 0.62
    assert result.selected["test_balanced_accuracy"] > 0.85
    base = signal[signal["arch"] == BASELINE_ARCH]["test_balanced_accuracy"]
    assert (base > 0.8).all()  # scikit-learn sees the same signal
    for name in ("runs.csv", "sweep.csv", "sweep_heatmap.png"):
        assert (tmp_path / name).stat().st_size > 0
    assert len(pd.read_csv(tmp_path / "sweep.csv")) == 12

    # a rerun finds every run done in runs.csv and trains nothing
    again = run_sweep(
        features, rows, config, rvp_sample=RVPSample(rvp_feats, valid, group_size=4), out_dir=tmp_path, progress=False
    )
    assert len(again.runs) == len(result.runs)
    pd.testing.assert_frame_equal(
        again.table.drop(columns="seconds"),
        pd.read_csv(tmp_path / "sweep.csv").drop(columns="seconds"),
        check_dtype=False,
        atol=1e-9,
    )

    # refitting the selected cell reproduces its best run exactly (seeded training)
    module, metrics = refit_selected(features, rows, result, config)
    runs = result.runs
    sel = result.selected
    cell = runs[(runs["key"] == sel["key"]) & (runs["arch"] == sel["arch"]) & (runs["balance"] == sel["balance"])]
    assert metrics["val_balanced_accuracy"] == pytest.approx(cell["val_balanced_accuracy"].max(), abs=1e-6)


def test_group_kfold_sweep_runs_every_fold():
    ids, features, pool = synthetic_probe_data(n=400, n_groups=8)
    rows = align_labels(ids, pool)
    config = small_config(archs=("linear",), seeds=(0,), split="group_kfold", n_folds=4, logistic_baseline=False)
    result = run_sweep({"layer1/mean_full": features["layer1/mean_full"]}, rows, config, progress=False)
    assert sorted(result.runs["fold"]) == [0, 1, 2, 3]
    assert result.table["n_runs"].tolist() == [4]


def test_stratified_kfold_sweep_holds_every_row_out_once():
    ids, features, pool = synthetic_probe_data(n=200)
    rows = align_labels(ids, pool)
    config = small_config(archs=("linear",), seeds=(0, 1), split="stratified_kfold", n_folds=5, logistic_baseline=False)
    result = run_sweep({"layer1/mean_full": features["layer1/mean_full"]}, rows, config, progress=False)
    assert sorted(result.runs["fold"]) == sorted([0, 1, 2, 3, 4] * 2) and result.table["n_runs"].tolist() == [10]
    mean = result.runs["test_balanced_accuracy"].mean()
    assert result.table["test_balanced_accuracy"].iloc[0] == pytest.approx(mean)
    _, metrics = refit_selected({"layer1/mean_full": features["layer1/mean_full"]}, rows, result, config)
    best = result.runs.loc[result.runs["val_balanced_accuracy"].idxmax()]
    assert metrics["fold"] == int(best["fold"])  # the fold whose test rows the refit never trained on


def test_tiny_model_texts_to_probe_to_scorer(tiny_model, tmp_path):
    """Texts -> cached activations -> sweep -> selected probe -> artifact -> ProbeScorer.logits on new texts."""
    model, tok = tiny_model
    words = ["apple", "river", "stone", "cloud", "tiger", "piano", "maple", "candle"]
    texts, labels = [], []
    for i in range(160):
        hard = i % 2
        texts.append(
            f"Task {i}: {words[i % 8]} {words[(i * 3) % 8]}"
            + (" prove the theorem carefully" if hard else " add two numbers")
        )
        labels.append(hard)
    ids = [f"q{i}" for i in range(len(texts))]
    pool = pd.DataFrame({"id": ids, "label": labels, "solve_count": [2 if y else 8 for y in labels]})
    ex = ActivationExtractor(model, tok, [1, 2], ["last_token", "mean_full"], batch_size=16)
    cache = extract_to_cache(
        ex, texts, model_id="tiny", cache_root=tmp_path / "cache", ids=ids, chunk_size=64, progress=False
    )
    features = {k: cache.load(k) for k in cache.keys}
    rows = align_labels(cache.ids, pool)
    config = small_config(archs=("linear",), seeds=(0,), logistic_baseline=False, max_ece=1.0)
    result = run_sweep(features, rows, config, progress=False)
    assert result.selected["val_balanced_accuracy"] > 0.9

    module, metrics = refit_selected(features, rows, result, config)
    layer, pooling = int(result.selected["layer"]), result.selected["pooling"]
    module.to_artifact("tiny", layer, pooling, max_length=ex.max_length, metrics=metrics).save(tmp_path / "probe")
    art = ProbeArtifact.load(tmp_path / "probe")
    assert art.metrics["val_balanced_accuracy"] == pytest.approx(metrics["val_balanced_accuracy"])
    scorer = ProbeScorer(art, model, tok, batch_size=4)
    new = ["Task 999: apple stone prove the theorem carefully", "Task 998: tiger cloud add two numbers"]
    logits = scorer.logits(new)
    with torch.no_grad():
        want = module(ActivationExtractor(model, tok, [layer], [pooling]).encode(new)[f"layer{layer}/{pooling}"])
    torch.testing.assert_close(logits, want, rtol=1e-4, atol=1e-5)
    assert logits[0] > logits[1]
