"""RVP against numpy and the selection rule (accuracy under an ECE limit, RVP tiebreak)."""

import numpy as np
import pandas as pd
import pytest
import torch

from propel.probes.selection import rvp, select_probe


def test_rvp_matches_numpy():
    r = torch.randn(6, 8, generator=torch.Generator().manual_seed(0))
    overall, within = rvp(r)
    assert overall == pytest.approx(np.var(r.numpy()), rel=1e-6)
    assert within == pytest.approx(np.var(r.numpy(), axis=1).mean(), rel=1e-6)


def test_rvp_constant_within_groups():
    r = torch.tensor([[1.0, 1.0, 1.0], [3.0, 3.0, 3.0]])
    overall, within = rvp(r)
    assert overall == pytest.approx(1.0) and within == 0.0
    with pytest.raises(ValueError, match="num_contexts"):
        rvp(torch.ones(4))


def table():
    return pd.DataFrame(
        {
            "name": ["acc_uncal", "acc", "acc_tie_hi_rvp", "worse"],
            "val_balanced_accuracy": [0.90, 0.80, 0.795, 0.70],
            "val_ece": [0.30, 0.05, 0.08, 0.02],
            "rvp_overall": [5.0, 0.1, 2.0, 9.0],
        }
    )


def test_selection_respects_ece_then_breaks_ties_by_rvp():
    assert select_probe(table(), max_ece=0.1)["name"] == "acc_tie_hi_rvp"
    assert select_probe(table(), max_ece=0.1, tie_tolerance=0.0)["name"] == "acc"
    assert select_probe(table().drop(columns="rvp_overall"), max_ece=0.1)["name"] == "acc"
    assert select_probe(table(), max_ece=1.0, tie_tolerance=0.0)["name"] == "acc_uncal"


def test_selection_without_any_calibrated_probe_warns():
    with pytest.warns(UserWarning, match="calibration limit"):
        assert select_probe(table(), max_ece=0.001, tie_tolerance=0.0)["name"] == "acc_uncal"
