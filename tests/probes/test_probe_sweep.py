"""Sweep end to end: synthetic features (grid, seeds, RVP, selection, resume, plots) and tiny model over texts."""

import numpy as np
import pandas as pd
import pytest
import torch

from propel.probes.artifact import ProbeArtifact, ProbeScorer
from propel.probes.cache import extract_to_cache
from propel.probes.data import align_labels
from propel.probes.extraction import ActivationExtractor
from propel.probes.gate import GateSpec
from propel.probes.sweep import refit_selected, run_sweep, split_indices
from propel.probes.sweep_run import train_run
from propel.probes.sweep_spec import BASELINE_ARCH, RUN_COLUMNS, RVPSample, SweepSpec
from propel.probes.training import LoopSpec
from propel.testing.probe_data import rvp_features, synthetic_probe_data


def small_config(**kw):
    kw = {"seeds": (0, 1), "loop": LoopSpec(max_epochs=15), "max_ece": 0.3, **kw}
    return SweepSpec(**kw)


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

    # a rerun finds every run done in runs.csv, trains nothing and rebuilds the first run's table from the file
    again = run_sweep(
        features, rows, config, rvp_sample=RVPSample(rvp_feats, valid, group_size=4), out_dir=tmp_path, progress=False
    )
    assert len(again.runs) == len(result.runs)
    assert_same_runs(again.table, result.table)

    # the refit reproduces the cell's first-seed run exactly (seeded training), not its best-validation run
    module, metrics = refit_selected(features, rows, result, config)
    runs = result.runs
    sel = result.selected
    cell = runs[(runs["key"] == sel["key"]) & (runs["arch"] == sel["arch"]) & (runs["balance"] == sel["balance"])]
    first = cell[(cell["seed"] == config.seeds[0]) & (cell["fold"] == 0)].iloc[0]
    assert (metrics["seed"], metrics["fold"]) == (config.seeds[0], 0)
    for name in ("val_balanced_accuracy", "test_balanced_accuracy", "test_auroc"):
        assert metrics[name] == pytest.approx(first[name], abs=1e-6)


def assert_same_runs(got, want):
    """Tables equal up to timing, matched by column name (never by position)."""
    got, want = (t.drop(columns="seconds").sort_index(axis=1) for t in (got, want))
    pd.testing.assert_frame_equal(got, want, check_dtype=False, atol=1e-9)


def _sweep_data():
    ids, features, pool = synthetic_probe_data(n=400)
    rows = align_labels(ids, pool)
    rvp_feats, valid = rvp_features(features, contexts=4, group_size=4)
    sample = RVPSample(rvp_feats, valid, group_size=4, gate=GateSpec(floor=-1.0))
    config = small_config(archs=("linear",), seeds=(0, 1), loop=LoopSpec(max_epochs=4))
    return features, rows, pool, sample, config


def test_runs_csv_has_a_fixed_schema_and_a_resume_rebuilds_the_same_table(tmp_path):
    """Baseline rows (no loss, no RVP) land under their own columns; a resume after a kill gives the fresh table."""
    features, rows, _, sample, config = _sweep_data()
    fresh = run_sweep(features, rows, config, rvp_sample=sample, out_dir=tmp_path / "a", progress=False)
    on_disk = pd.read_csv(tmp_path / "a" / "runs.csv")
    assert list(on_disk.columns) == RUN_COLUMNS
    assert_same_runs(on_disk, fresh.runs)
    base = on_disk[on_disk["arch"] == BASELINE_ARCH]
    assert len(base) == 2 and base["val_loss"].isna().all() and base["rvp_overall"].isna().all()
    assert (base["test_balanced_accuracy"] != base["test_f1"]).all()

    # kill after 3 runs (a linear run first, then a baseline row), then resume into the same folder
    run_sweep(features, rows, config, rvp_sample=sample, out_dir=tmp_path / "b", progress=False)
    runs_b = tmp_path / "b" / "runs.csv"
    lines = runs_b.read_text().splitlines(keepends=True)
    runs_b.write_text("".join(lines[:4]))
    resumed = run_sweep(features, rows, config, rvp_sample=sample, out_dir=tmp_path / "b", progress=False)
    assert_same_runs(resumed.table, fresh.table)
    assert_same_runs(
        pd.read_csv(runs_b).sort_values(["key", "arch", "seed"], ignore_index=True),
        fresh.runs.sort_values(["key", "arch", "seed"], ignore_index=True),
    )


def test_resume_restarts_when_labels_features_or_recipe_change(tmp_path):
    features, rows, pool, sample, config = _sweep_data()
    first = run_sweep(features, rows, config, rvp_sample=sample, out_dir=tmp_path, progress=False)

    # selection-only settings reuse every finished run
    loose = small_config(archs=("linear",), seeds=(0, 1), loop=LoopSpec(max_epochs=4), max_ece=1.0)
    reused = run_sweep(features, rows, loose, rvp_sample=sample, out_dir=tmp_path, progress=False)
    pd.testing.assert_series_equal(reused.runs["seconds"], first.runs["seconds"])

    flipped = pool.assign(label=1 - pool["label"])
    rows2 = align_labels(list(pool["id"]), flipped)
    with pytest.warns(UserWarning, match="labels"):
        relabeled = run_sweep(features, rows2, config, rvp_sample=sample, out_dir=tmp_path, progress=False)
    assert (tmp_path / "runs.stale.csv").exists()
    fresh = run_sweep(features, rows2, config, rvp_sample=sample, progress=False)
    assert_same_runs(relabeled.table, fresh.table)

    changed = small_config(archs=("linear",), seeds=(0, 1), loop=LoopSpec(max_epochs=4), lr=3e-3)
    with pytest.warns(UserWarning, match="recipe"):
        run_sweep(features, rows2, changed, rvp_sample=sample, out_dir=tmp_path, progress=False)
    other = {k: v + 1.0 for k, v in features.items()}
    with pytest.warns(UserWarning, match="features"):
        run_sweep(other, rows2, changed, rvp_sample=sample, out_dir=tmp_path, progress=False)


def test_group_kfold_sweep_rotates_validation_over_the_inner_folds():
    ids, features, pool = synthetic_probe_data(n=400, n_groups=8)
    rows = align_labels(ids, pool)
    config = small_config(archs=("linear",), seeds=(0,), split="group_kfold", n_folds=4, logistic_baseline=False)
    result = run_sweep({"layer1/mean_full": features["layer1/mean_full"]}, rows, config, progress=False)
    assert sorted(result.runs["fold"]) == [0, 1, 2]
    assert result.table["n_runs"].tolist() == [3]
    test_groups = set(rows.groups[split_indices(rows, config, 0)[2]])
    for fold in range(3):
        train, val, _ = split_indices(rows, config, fold)
        assert not test_groups & set(rows.groups[np.concatenate([train, val])])


@pytest.mark.parametrize("test_fold", [0, 3])
def test_kfold_selection_never_sees_the_outer_test_fold(test_fold):
    """Nested k-fold: every run shares one outer test fold that no run trains or validates on."""
    ids, features, pool = synthetic_probe_data(n=200)
    rows = align_labels(ids, pool)
    config = small_config(
        archs=("linear", "mlp"),
        seeds=(0, 1),
        split="stratified_kfold",
        n_folds=5,
        test_fold=test_fold,
        loop=LoopSpec(max_epochs=4),
        logistic_baseline=False,
    )
    splits = [split_indices(rows, config, k) for k in range(4)]
    test = splits[0][2]
    assert all(np.array_equal(s[2], test) for s in splits)
    selection_rows = np.concatenate([np.concatenate([s[0], s[1]]) for s in splits])
    assert not np.isin(test, selection_rows).any()  # the rows that grade the probe never chose it
    vals = np.concatenate([s[1] for s in splits])
    assert sorted(np.concatenate([vals, test])) == list(range(len(rows.ids)))  # validation covers the rest once

    feats = {"layer1/mean_full": features["layer1/mean_full"]}
    result = run_sweep(feats, rows, config, progress=False)
    assert sorted(result.runs["fold"]) == sorted([0, 1, 2, 3] * 4)
    assert result.selected["n_runs"] == 8
    _, metrics = refit_selected(feats, rows, result, config)
    assert (metrics["seed"], metrics["fold"]) == (0, 0)


def test_refit_is_the_sweeps_own_head_and_a_resumed_sweep_trains_it_again(tmp_path):
    """The selection ends the bank's fit and keeps the selected cell's first run: the refit returns that head (no
    second training), with the weights and numbers a fresh training of the run gives; a sweep resumed with every
    run done has no such head, and the refit trains it, to the same weights."""
    ids, features, pool = synthetic_probe_data(n=400)
    rows = align_labels(ids, pool)
    config = small_config(archs=("linear", "mlp"), logistic_baseline=False, loop=LoopSpec(max_epochs=6))
    result = run_sweep(features, rows, config, out_dir=tmp_path, progress=False)
    sel = result.selected
    assert result.first_run is not None
    module, metrics = refit_selected(features, rows, result, config)
    assert module is result.first_run.module

    x = features[sel["key"]][torch.as_tensor(rows.rows, dtype=torch.long)].float()
    fresh, fresh_metrics = train_run(x, rows, split_indices(rows, config), config, sel["arch"], sel["balance"], 0)
    got, want = module.state_dict(), fresh.state_dict()
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    assert {k: metrics[k] for k in fresh_metrics} == fresh_metrics

    again = run_sweep(features, rows, config, out_dir=tmp_path, progress=False)  # every run read back from runs.csv
    assert again.first_run is None and again.selected.equals(sel)
    trained, trained_metrics = refit_selected(features, rows, again, config)
    assert trained is not module and all(torch.equal(trained.state_dict()[k], want[k]) for k in want)
    assert {k: trained_metrics[k] for k in fresh_metrics} == fresh_metrics


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
