"""``experiments/propel_arms/run.py``: the probes it trains load as ``ProbeReward`` artifacts (the shuffled one with the
same cell and label count), the paired analysis finds a planted difference and none where there is none and is
reproduced from its rows (seconds), and a tiny real run (the bundled model, a 1-step warm start and 1 step per arm
continuing it) trains, evaluates, writes its files and resumes without retraining. The measured tables are the
experiment's own, committed under ``docs/experiments/propel_arms/`` and ``docs/experiments/propel_arms_warm/``."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest
import torch

from propel.probes.artifact import ProbeArtifact
from propel.records import Task


def _ranking_workdir(path, n_contexts=30, group=6):
    """A ranking run's files (tasks, exact p, features) whose feature 0 carries p."""
    rng = np.random.default_rng(0)
    tasks, exact, feats = [], [], []
    for c in range(n_contexts):
        for k in range(group):
            p = float(rng.beta(0.7, 4.0))
            task = Task(domain="math_expression", data={"problem": f"p{c}-{k}", "expression": "1 + 1", "answer": 2})
            tasks.append({"context": f"c{c}", "k": k, "group": f"g{c % 10}", "valid": True, "task": task.to_json()})
            exact.append({"id": f"c{c}/{k}", "p": p})
            feats.append([p * 10 + rng.normal(0, 0.1), *rng.normal(size=5)])
    path.mkdir(parents=True)
    (path / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in tasks))
    (path / "exact.jsonl").write_text("".join(json.dumps(r) + "\n" for r in exact))
    x = torch.tensor(feats, dtype=torch.float32)
    torch.save(
        {"ids": [e["id"] for e in exact], "features": {"layer6/last_token": x, "layer12/mean_full": x[:, 1:]}},
        path / "features.pt",
    )


def test_probes_are_artifacts_with_recorded_quantiles_and_the_shuffled_one_shares_the_cell(experiment_module, tmp_path):
    exp = experiment_module("propel_arms/run")
    _ranking_workdir(tmp_path / "ranking")
    args = argparse.Namespace(ranking_workdir=str(tmp_path / "ranking"), seed=0)
    paths = exp.probes(args, tmp_path / "work")
    probe, shuffled = (ProbeArtifact.load(paths[k]) for k in ("propel", "shuffled"))
    assert (probe.layer, probe.pooling) == (6, "last_token")  # the informative cell wins the inner split
    assert (
        probe.metrics["cell"] == shuffled.metrics["cell"]
        and probe.metrics["positives"] == shuffled.metrics["positives"]
    )
    assert probe.logit_quantiles["n"] == shuffled.logit_quantiles["n"] == 180
    assert exp.probes(args, tmp_path / "work") == paths  # done: not refit


def _eval_rows(effects: dict[str, float], seeds, n_contexts=40, samples=4, noise=0.02):
    rng = np.random.default_rng(1)
    rows = []
    base_u = rng.uniform(0, 0.3, n_contexts)
    for policy, effect in effects.items():
        for seed in [None] if policy == "base" else seeds:
            shift = effect + (0 if seed is None else rng.normal(0, noise))
            name = "base" if seed is None else f"{seed}-{policy}"
            for c in range(n_contexts):
                for k in range(samples):
                    u = float(np.clip(base_u[c] + shift + rng.normal(0, 0.05), 0, 1))
                    rows.append(
                        {
                            "policy": name,
                            "context": f"c{c:02d}",
                            "k": k,
                            "valid": True,
                            "reason": "ok",
                            "copy": False,
                            "p": 0.1,
                            "u": u,
                            "yield": u,
                            "task": None,
                        }
                    )
    return rows


def test_the_paired_analysis_finds_a_planted_difference_and_is_reproduced_from_rows(experiment_module, tmp_path):
    exp = experiment_module("propel_arms/run")
    seeds, arms = [1, 2, 3], ["gate", "propel", "shuffled", "oracle"]
    rows = _eval_rows({"base": 0.0, "gate": 0.05, "propel": 0.15, "shuffled": 0.05, "oracle": 0.3}, seeds, noise=0.005)
    analysis = exp.analyse(rows, seeds, arms)
    c = analysis["contrasts"]
    assert c["propel-gate"]["mean"] == pytest.approx(0.10, abs=0.04) and c["propel-gate"]["t95"][0] > 0
    assert c["propel-gate"]["bootstrap95"][0] > 0
    assert c["propel-shuffled"]["t95"][0] > 0 and c["oracle-gate"]["mean"] > c["propel-gate"]["mean"]
    assert c["propel-gate"]["detectable_80"] == pytest.approx(
        (4.3027 + 1.0607) * c["propel-gate"]["seed_sd"] / np.sqrt(3), rel=1e-3
    )
    same = exp.analyse(
        _eval_rows({"base": 0, "gate": 0.1, "propel": 0.1}, seeds, noise=0.03), seeds, ["gate", "propel"]
    )
    lo, hi = same["contrasts"]["propel-gate"]["t95"]
    assert lo < 0 < hi
    (tmp_path / "summary.json").write_text(json.dumps({"analysis": analysis, "arms": arms}))
    exp.write_rows(tmp_path / "rows.csv", rows)
    assert exp.reanalyse(tmp_path / "rows.csv") == json.loads(json.dumps(analysis))
    text = (tmp_path / "rows.csv").read_text().replace("1-propel,c00,0", "1-gate,c00,0", 1)
    (tmp_path / "rows.csv").write_text(text)
    with pytest.raises(SystemExit, match="do not reproduce"):
        exp.reanalyse(tmp_path / "rows.csv")


@pytest.mark.real_model
def test_a_tiny_real_run_trains_evaluates_and_resumes(experiment_module, tmp_path, capsys):
    exp = experiment_module("propel_arms/run")
    argv = [
        "--workdir",
        str(tmp_path / "w"),
        "--out",
        str(tmp_path / "out"),
        "--seeds",
        "1",
        "--arms",
        "gate",
        "oracle",
        "--steps",
        "1",
        "--contexts-per-step",
        "1",
        "--group-size",
        "2",
        "--eval-contexts",
        "1",
        "--eval-samples",
        "2",
        "--max-new-tokens",
        "12",  # nothing is valid at any length this short a run allows: generation is most of the test's time
        "--warm-start-steps",
        "1",
    ]
    summary = exp.main(argv)
    assert set(summary["analysis"]["policies"]) == {"base", "warm", "1-gate", "1-oracle"}
    assert {p["samples"] for p in summary["analysis"]["policies"].values()} == {2}
    assert "gate-warm" in summary["analysis"]["contrasts"]
    # each arm continued the warm start: its one step is the run's second
    assert (tmp_path / "w" / "1" / "oracle" / "adapters" / "step-2").exists()
    assert not (tmp_path / "w" / "1" / "oracle" / "adapters" / "step-1").exists()
    assert summary["training"]["oracle"]["valid_rate"] is not None
    for name in ("summary.json", "report.md", "rows.csv"):
        assert (tmp_path / "out" / name).exists()
    assert "# Does GRPO against the probe beat" in (tmp_path / "out" / "report.md").read_text()
    capsys.readouterr()
    again = exp.main(argv)  # everything is there: nothing is trained or sampled again
    assert "train:" not in capsys.readouterr().out and again["analysis"] == summary["analysis"]
    exp.main(["--from-rows", str(tmp_path / "out" / "rows.csv")])
