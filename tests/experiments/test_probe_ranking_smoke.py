"""``experiments/probe_ranking/run.py``: the cross-fitted analysis finds a lift where the features carry the utility
and none where the labels are shuffled (synthetic rows, seconds), and a small real run (the bundled model, 3
contexts) writes its files, resumes without regenerating, and reports every method. The measured table is the
experiment's own, committed under ``docs/experiments/probe_ranking/``."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch

from propel.domains.exact_trials import band_utility
from propel.records import Task


def _rows(n_contexts=40, group=6, seed=0):
    """Synthetic valid tasks whose solve probability is written in feature 0 of the 'activations'."""
    rng = np.random.default_rng(seed)
    rows, feats = [], []
    for c in range(n_contexts):
        for k in range(group):
            p = float(rng.beta(0.7, 6.0))  # mostly below 0.4, where u rises with p
            counts = int(rng.binomial(8, p))
            a = int(rng.integers(1, 500))
            task = Task(
                domain="math_expression", data={"problem": f"p{c}-{k} " * 3, "expression": f"{a} + 0", "answer": a}
            )
            rows.append(
                {
                    "context": f"c{c}",
                    "group": f"g{c % 12}",
                    "k": k,
                    "id": f"c{c}/{k}",
                    "text": f"c{c}/{k}",
                    "task": task.to_json(),
                    "copy": False,
                    "solve_count": counts,
                    "p": p,
                    "u": band_utility(p, 8, (1, 3)),
                }
            )
            feats.append([p + rng.normal(0, 0.03), *rng.normal(size=7)])
    x = torch.tensor(feats, dtype=torch.float32)
    return rows, {
        "L6/last_token": x,
        "L12/last_token": x[:, torch.randperm(8, generator=torch.Generator().manual_seed(1))],
    }


def test_the_analysis_sees_a_lift_in_informative_features_and_none_in_shuffled_labels(experiment_module):
    exp = experiment_module("probe_ranking/run")
    rows, feats = _rows()
    args = argparse.Namespace(seed=0, domain="math")
    scores, cells = exp.cross_fit(args, rows, feats)
    result = exp.analyse(args, rows, scores, cells)["methods"]
    # the rivals that read no activations are there too; the probe reads what they cannot (feature 0 carries p)
    assert {"zero_fit", "text", "probe+cheap"} <= set(result) and result["probe-text"]["lift_u"]["estimate"] > 0
    assert result["oracle"]["lift_u"]["low"] > 0
    assert result["probe"]["lift_u"]["low"] > 0  # the probe reads feature 0
    assert result["probe"]["spearman_p"] > 0.5
    assert result["shuffled"]["lift_u"]["low"] < 0.02 < result["probe"]["lift_u"]["estimate"]
    assert result["probe-shuffled"]["lift_u"]["estimate"] > 0
    assert result["oracle-probe"]["lift_u"]["estimate"] >= -1e-9  # nothing beats the ceiling


def test_committed_rows_read_back_compressed_and_under_their_fit_seed(experiment_module, tmp_path):
    """``--out`` commits ``rows.csv.gz``; ``--from-rows`` reads it and reproduces the analysis only under the fit seed
    the summary names (the bootstrap ran under it), not the default seed it is called with."""
    import gzip
    import shutil

    exp = experiment_module("probe_ranking/run")
    rows, feats = _rows(n_contexts=20)
    fitted = argparse.Namespace(seed=3, domain="math")
    scores, cells = exp.cross_fit(fitted, rows, feats)
    ranking = exp.analyse(fitted, rows, scores, cells)
    exp.write_rows(tmp_path / "rows.csv", rows, scores)
    with (tmp_path / "rows.csv").open("rb") as src, gzip.open(tmp_path / "rows.csv.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    assert exp.read_rows(tmp_path / "rows.csv.gz")[0] == exp.read_rows(tmp_path / "rows.csv")[0]
    summary = {"settings": {"fit_seed": 3}, "ranking": json.loads(json.dumps(ranking))}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    again = exp.reanalyse(argparse.Namespace(seed=0, domain="math"), tmp_path / "rows.csv.gz")
    assert json.loads(json.dumps(again["methods"])) == summary["ranking"]["methods"]
    summary["settings"]["fit_seed"] = None  # read under seed 0, the bootstrap intervals differ
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with pytest.raises(SystemExit):
        exp.reanalyse(argparse.Namespace(seed=0, domain="math"), tmp_path / "rows.csv.gz")


def test_a_method_that_scored_nothing_in_a_fold_never_picks_those_tasks(experiment_module):
    exp = experiment_module("probe_ranking/run")
    rows, feats = _rows(n_contexts=12)
    args = argparse.Namespace(seed=0, domain="math")
    scores, cells = exp.cross_fit(args, rows, feats)
    u = np.array([r["u"] for r in rows])
    holed = scores["oracle"].copy()
    first = [i for i, r in enumerate(rows) if r["context"] == "c0"]
    holed[first] = np.nan  # a context scored nothing: its pick is random (lift 0)
    best = int(np.argmax(u[[i for i, r in enumerate(rows) if r["context"] == "c1"]]))
    holed[[i for i, r in enumerate(rows) if r["context"] == "c1"][best]] = np.nan  # c1's best task left unscored
    result = exp.analyse(args, rows, {**scores, "oracle": holed}, cells)["methods"]["oracle"]
    assert result["unscored"] == len(first) + 1
    assert np.isfinite(result["lift_u"]["estimate"]) and result["auroc_sampled_label"] is not None
    full = exp.analyse(args, rows, scores, cells)["methods"]["oracle"]
    assert result["lift_u"]["estimate"] < full["lift_u"]["estimate"]


@pytest.mark.parametrize("arch", ["linear", "mlp"])
def test_a_probe_fit_depends_on_its_seed_not_on_what_ran_before(experiment_module, arch):
    """The head's init was drawn from the process's torch stream, so the inner-split cell choice changed with the
    tests (or, in a resumed run, the stages) that ran before it: a noise cell won the arms smoke under load."""
    exp = experiment_module("probe_ranking/run")
    rows, feats = _rows(n_contexts=10)
    x, y = feats["L6/last_token"], torch.tensor([float(1 <= r["solve_count"] <= 3) for r in rows])
    fits = []
    for state in (1, 2):
        torch.manual_seed(state)
        module = exp._fit_probe(x[:40], y[:40], x[40:], y[40:], arch, seed=0)
        fits.append(module.head.state_dict())
    assert all(torch.equal(a, b) for a, b in zip(fits[0].values(), fits[1].values(), strict=True))


@pytest.mark.real_model
def test_a_small_real_run_writes_its_files_and_resumes(experiment_module, tmp_path, capsys):
    exp = experiment_module("probe_ranking/run")
    argv = [
        "--workdir",
        str(tmp_path / "w"),
        "--out",
        str(tmp_path / "out"),
        "--contexts",
        "6",
        "--group-size",
        "4",
        "--layers",
        "6",
        "--validate",
        "2",
        "--validate-trials",
        "2",
        "--chunk",
        "3",
    ]
    summary = exp.main(argv)
    for name in ("summary.json", "report.md", "rows.csv.gz"):
        assert (tmp_path / "out" / name).exists()
    assert summary["generation"]["samples"] == 24
    assert set(summary["ranking"]["methods"]) >= set(exp.METHODS)
    lines = (tmp_path / "w" / "tasks.jsonl").read_text().splitlines()
    again = exp.main(argv)  # resumes: no new generation, same numbers
    assert (tmp_path / "w" / "tasks.jsonl").read_text().splitlines() == lines
    assert json.dumps(again["ranking"], sort_keys=True) == json.dumps(summary["ranking"], sort_keys=True)
    assert "# Does the probe rank" in (tmp_path / "out" / "report.md").read_text()
    exp.main(["--from-rows", str(tmp_path / "out" / "rows.csv.gz")])  # the committed rows reproduce the summary
