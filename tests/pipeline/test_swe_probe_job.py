"""SWE trajectory probes: the probe job reads each labeled bug's generator episode turn by turn
(each assistant turn pooled over its tokens, then across the episode), folds are repositories, and the exported
probe scores trajectories the way the RL reward hands them over (``ProbeReward(text="turns")``)."""

from __future__ import annotations

import json

import pytest
import torch

from propel.domains.swe import SweDomain
from propel.engines.tool_calls import ToolCall, format_tool_call
from propel.errors import ConfigError
from propel.jobs.probe_job import ProbeJob, RVPSpec
from propel.pools.io import read_pool, write_part
from propel.probes.gate import GateSpec
from propel.probes.sweep_spec import SweepSpec
from propel.records import Task

REPOS = ["parse", "inflection", "isodate", "webcolors"]  # probe_train


def _turns(repo: str, i: int, positive: bool) -> list[str]:
    """A bug-injection episode's assistant turns: look, edit (a comparison flipped or a constant changed), submit."""
    edit = "s/ < / >= /" if positive else "s/= 1$/= 2/"
    return [
        format_tool_call(ToolCall("bash", {"command": f"grep -n 'def ' {repo}.py | head -{5 + i}"})),
        format_tool_call(ToolCall("bash", {"command": f"sed -i '{edit}' {repo}.py"})),
        format_tool_call(ToolCall("submit", {})),
    ]


def _pool(path, per_repo: int = 6, procedural: int = 1) -> list[dict]:
    rows = []
    for repo in REPOS:
        for i in range(per_repo + procedural):
            positive = i % 2 == 0
            data = {"repo": repo, "diff": f"--- a/{repo}.py\n+++ b/{repo}.py\n@@ -{i} +{i} @@\n-x\n+y\n"}
            if i < per_repo:  # the last one is a procedural bug: no episode, its diff is the one turn
                data["turns"] = _turns(repo, i, positive)
            rows.append(
                {
                    "id": f"{repo}-{i}",
                    "group": repo,
                    "domain": "swe",
                    "task": Task(domain="swe", data=data).to_json(),
                    "completion": json.dumps(data),
                    "valid": True,
                    "reason": "ok",
                    "solve_count": 1 if positive else 3,
                    "label": int(positive),
                    "n_trials": 3,
                }
            )
    write_part(path, rows)
    return rows


def _job(tmp_path, tiny_model_dir, **kw) -> ProbeJob:
    sweep = SweepSpec(archs=["linear"], balances=["weighted"], seeds=[0], split="group_kfold", n_folds=4, max_ece=1.0)
    args = dict(
        pool=str(tmp_path / "pool"),
        domain=SweDomain(REPOS),
        output_dir=str(tmp_path / "probe"),
        reference_model=str(tiny_model_dir),
        layers=[1, 2],
        poolings=["mean_full"],
        sweep=sweep,
        trajectory_pooling="max",
    )
    args.update(kw)
    return ProbeJob(**args)


def test_the_probe_reads_episodes_turn_by_turn_with_repo_folds(tmp_path, tiny_model_dir):
    from propel.models import load_model
    from propel.probes import ActivationExtractor, ProbeArtifact, ProbeScorer
    from propel.records import Sample, Turn
    from propel.rewards import ProbeReward

    rows = _pool(tmp_path / "pool")
    job = _job(tmp_path, tiny_model_dir, rvp=RVPSpec(contexts=0))
    summary = job.run()
    assert summary["rows"] == len(rows) and summary["split"] == "group_kfold" and summary["n_folds"] == 4
    held = summary["held_out"]  # the exported probe on its refit split's test rows, against three baselines
    assert set(held) == {"rows", "probe", "logistic", "length_only"}  # this pool has no topics: no topic baseline
    assert held["probe"]["balanced_accuracy"] == pytest.approx(
        summary["selected_refit_metrics"]["test_balanced_accuracy"]
    )
    assert {"vs_chance", "vs_logistic", "vs_length_only"} <= set(held["probe"])

    artifact = ProbeArtifact.load(tmp_path / "probe" / "probe_artifact")  # the probe (artifact/: the winner)
    assert artifact.trajectory_pooling == "max"
    model, tokenizer = load_model(str(tiny_model_dir))
    extractor = ActivationExtractor(model, tokenizer, [artifact.layer], [artifact.pooling], max_length=512)
    key = extractor.keys[0]
    domain = SweDomain(REPOS)
    episode, procedural = rows[0], rows[6]  # parse-0 has turns; parse-6 is procedural

    # an episode's feature is the max over its turns of each turn's pooled vector, not the feature of its diff
    turns = domain.probe_input(Task.from_json(episode["task"]))
    assert turns == _turns("parse", 0, True)
    per_turn = extractor.encode_texts(turns)[key]
    expected = per_turn.max(0).values
    scorer = ProbeScorer(artifact, model, tokenizer)
    assert torch.allclose(scorer.features([turns])[0], expected, atol=1e-5)
    diff_only = extractor.encode_texts([json.loads(episode["completion"])["diff"]])[key][0]
    assert not torch.allclose(expected, diff_only, atol=1e-3)
    # a procedural bug is the one-turn trajectory of its diff
    assert domain.probe_input(Task.from_json(procedural["task"])) == [json.loads(procedural["completion"])["diff"]]

    # the RL reward hands the probe an episode's assistant turns: the same logit as the labeled trajectory
    sample = Sample(prompt="p", completion="\n".join(turns), valid=True)
    for text in turns:
        sample.turns += [Turn("assistant", text), Turn("tool", "[exit code 0]", trainable=False)]
    reward = ProbeReward(probe=scorer, text="turns", gate=GateSpec(mode="hard_gate", floor=-5.0))
    invalid = Sample(prompt="p", completion="x", valid=False, turns=[Turn("assistant", "x")])
    got = reward([sample, invalid])
    assert got[0].item() == pytest.approx(scorer.logits([turns])[0].item(), abs=1e-5) and got[1].item() == -5.0


def test_repo_folds_need_as_many_repos_and_rvp_needs_single_turn_generation(tmp_path, tiny_model_dir):
    _pool(tmp_path / "pool", per_repo=2, procedural=0)
    with pytest.raises(ConfigError, match="rvp.contexts: 0"):
        _job(tmp_path, tiny_model_dir).run()  # RVPSpec() samples 8 contexts by default
    job = _job(tmp_path, tiny_model_dir, rvp=RVPSpec(contexts=0))
    job.sweep.n_folds = 5
    with pytest.raises(ValueError, match="4 distinct groups cannot fill n_folds=5"):
        job.run()
    assert len(read_pool(tmp_path / "pool")) == 8
