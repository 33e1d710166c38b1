"""Post-hoc probe calibration: Platt / temperature scaling fit on the validation fold.

A synthetic pool with a known miscalibration: labels drawn from ``sigmoid(z)``, the probe reports ``3 z + 2``
(overconfident and shifted). Scaling must lower ECE on held-out rows, leave AUROC exactly as it was, round-trip
through the artifact, and reach the sweep table, selection and the soft gate.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from propel.metrics.calibration import LogitScaling, expected_calibration_error, fit_logit_scaling
from propel.metrics.classification import binary_metrics
from propel.probes.artifact import ProbeArtifact
from propel.probes.data import align_labels
from propel.probes.gate import GateSpec
from propel.probes.heads import ProbeHead
from propel.probes.selection import select_probe
from propel.probes.sweep import run_sweep
from propel.probes.sweep_spec import SweepSpec
from propel.probes.training import LoopSpec
from propel.records import Sample
from propel.rewards.probe_reward import ProbeReward
from propel.testing.probe_data import synthetic_probe_data


def _pool(n: int, seed: int, scale: float = 3.0, shift: float = 2.0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, generator=g) * 1.5
    y = (torch.rand(n, generator=g) < torch.sigmoid(z)).float()
    return z * scale + shift, y


@pytest.mark.parametrize("method", ["platt", "temperature"])
def test_scaling_lowers_ece_and_keeps_auroc(method):
    val_logits, val_y = _pool(4000, seed=0)
    test_logits, test_y = _pool(4000, seed=1)
    scaling = fit_logit_scaling(val_logits, val_y, method)
    before = expected_calibration_error(torch.sigmoid(test_logits), test_y)
    after = expected_calibration_error(scaling.probs(test_logits), test_y)
    assert before > 0.1 and after < before / 2
    if method == "platt":  # the true map is z = (logit - 2) / 3
        assert scaling.scale == pytest.approx(1 / 3, rel=0.1) and scaling.bias == pytest.approx(-2 / 3, abs=0.15)
        assert after < 0.03
    else:
        assert scaling.bias == 0.0 and scaling.scale < 1.0
    raw = binary_metrics(test_logits, test_y)["auroc"]
    calibrated = binary_metrics(scaling.logits(test_logits), test_y)["auroc"]
    assert calibrated == pytest.approx(raw, abs=1e-6)  # float32 AUROC: equal up to rounding


def test_degenerate_and_bad_inputs():
    assert fit_logit_scaling(torch.randn(10), torch.ones(10)) == LogitScaling()  # one class: identity
    with pytest.raises(ValueError, match="method"):
        fit_logit_scaling(torch.randn(4), torch.tensor([0.0, 1, 0, 1]), "isotonic")
    with pytest.raises(ValueError, match="scale must be > 0"):
        LogitScaling(scale=-1.0)


def test_artifact_round_trips_calibration_and_quantiles(tmp_path):
    torch.manual_seed(0)
    scaling = LogitScaling(scale=0.4, bias=-0.7, method="platt")
    art = ProbeArtifact(ProbeHead("linear", 8), "m", 1, "mean_full", calibration=scaling)
    art.logit_quantiles = {"n": 3, "min": -2.0, "q25": -1.0, "q75": 0.5, "max": 1.0}
    loaded = ProbeArtifact.load(art.save(tmp_path / "a"))
    assert loaded.calibration == scaling and loaded.logit_quantiles == art.logit_quantiles
    x = torch.randn(5, 8)
    torch.testing.assert_close(loaded.score(x), art.score(x))  # the raw logit (hard gate) is unchanged
    torch.testing.assert_close(loaded.probs(x), torch.sigmoid(0.4 * art.score(x) - 0.7))
    plain = ProbeArtifact.load(ProbeArtifact(ProbeHead("linear", 8), "m", 1, "mean_full").save(tmp_path / "b"))
    assert plain.calibration is None and plain.logit_quantiles is None
    torch.testing.assert_close(plain.probs(x), torch.sigmoid(plain.score(x)))


def test_soft_gate_uses_calibrated_probabilities_and_hard_gate_the_raw_logit():
    class Calibrated:
        def logits(self, texts):
            return torch.tensor([4.0, -4.0, 8.0])[: len(texts)]

        def calibrated_logits(self, texts):
            return self.logits(texts) * 0.25

    samples = [Sample("p", "a"), Sample("p", "b"), Sample("p", "c")]
    soft = ProbeReward(Calibrated(), gate=GateSpec(mode="soft_gate"))(samples)
    torch.testing.assert_close(soft, torch.sigmoid(torch.tensor([1.0, -1.0, 2.0])))
    hard = ProbeReward(Calibrated(), gate=GateSpec(floor=-10.0))(samples)
    torch.testing.assert_close(hard, torch.tensor([4.0, -4.0, 8.0]))


def test_sweep_reports_ece_before_and_after_and_selects_on_the_calibrated_value():
    """Downsampled training on a 30%-positive pool overpredicts positives: Platt scaling on the validation fold
    corrects it, on the validation rows and on test rows it never saw."""
    ids, features, pool = synthetic_probe_data(n=1500, keys=("layer1/mean_full",), signal=(2.0,))
    rows = align_labels(ids, pool)
    config = SweepSpec(archs=("linear",), seeds=(0, 1), loop=LoopSpec(max_epochs=15), logistic_baseline=False)
    result = run_sweep(features, rows, config, progress=False)
    runs, table = result.runs, result.table
    for col in ("val_ece", "val_ece_calibrated", "test_ece", "test_ece_calibrated", "calibration_scale"):
        assert col in table.columns and runs[col].notna().all()
    assert (runs["val_ece_calibrated"] < runs["val_ece"]).all()
    assert runs["test_ece_calibrated"].mean() < runs["test_ece"].mean()
    assert (runs["calibration_scale"] > 0).all()

    cells = pd.DataFrame(
        {
            "val_balanced_accuracy": [0.90, 0.80],
            "val_ece": [0.30, 0.05],
            "val_ece_calibrated": [0.04, 0.05],
        }
    )
    assert select_probe(cells, max_ece=0.1).name == 0  # raw ECE 0.30 would have excluded the better probe
    assert select_probe(cells.drop(columns="val_ece_calibrated"), max_ece=0.1).name == 1  # old tables: raw ECE


def test_the_calibration_limit_reads_the_excess_over_a_calibrated_probes_ece_on_as_many_rows():
    """The sweep records, per run, the calibrated ECE minus the ECE a perfectly calibrated probe with the same
    probabilities shows on as many rows; selection limits that excess. On a 32-row fold an informative, calibrated
    probe's raw ECE is near 0.2 while a near-constant one's is under 0.1: the raw limit keeps the useless probe."""
    ids, features, pool = synthetic_probe_data(n=320, keys=("layer1/mean_full",), signal=(2.0,))
    rows = align_labels(ids, pool)
    config = SweepSpec(archs=("linear",), seeds=(0,), loop=LoopSpec(max_epochs=10), logistic_baseline=False)
    runs = run_sweep(features, rows, config, progress=False).runs
    for split in ("val", "test"):
        floor = runs[f"{split}_ece_calibrated"] - runs[f"{split}_ece_excess"]
        assert runs[f"{split}_ece_excess"].notna().all() and (floor > 0.02).all()  # ~32 rows: noise alone
    assert (runs["val_ece_excess"] < runs["val_ece_calibrated"]).all()

    cells = pd.DataFrame(
        {
            "name": ["informative", "near_constant"],
            "val_balanced_accuracy": [0.78, 0.60],
            "val_ece_calibrated": [0.15, 0.09],
            "val_ece_excess": [-0.04, -0.03],
        }
    )
    assert select_probe(cells, max_ece=0.1)["name"] == "informative"
    assert select_probe(cells.drop(columns="val_ece_excess"), max_ece=0.1)["name"] == "near_constant"  # old tables


def test_separable_small_fold_keeps_a_finite_scale():
    """Platt's smoothed targets: 10 perfectly separated validation rows give a moderate scale, not a step function."""
    logits = torch.tensor([-2.0, -1.5, -1.0, -0.5, -0.2, 0.2, 0.5, 1.0, 1.5, 2.0])
    labels = (logits > 0).float()
    scaling = fit_logit_scaling(logits, labels)
    assert 1.0 < scaling.scale < 20.0
    probs = scaling.probs(logits)
    assert float(probs.max()) < 0.99 and float(probs.min()) > 0.01
