"""The probe against its rivals: the exact best-of-k lift, the competition on pools where one side carries the
label, rival rankers saved and loaded as rewards, and the gate and floor applied to them as to a probe."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from propel.domains import MathExpressionDomain
from propel.metrics.ranking import best_of_k_lift
from propel.probes.competition import RivalSpec, compete, markdown
from propel.probes.data import LabeledRows
from propel.probes.gate import logit_quantiles
from propel.probes.rivals import RivalRanker, fit_rival, load_ranker
from propel.probes.sweep_spec import SweepSpec
from propel.probes.training import LoopSpec
from propel.records import Sample, Task
from propel.rewards.probe_reward import ProbeReward


def brute_force_lift(scores, utility, k):
    total, count = 0.0, 0
    for subset in itertools.combinations(range(len(scores)), k):
        top = max(scores[i] for i in subset)
        total += np.mean([utility[i] for i in subset if scores[i] == top])
        count += 1
    return total / count - np.mean(utility)


@pytest.mark.parametrize("seed", range(6))
def test_best_of_k_lift_is_exact_over_every_subset(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 9))
    k = int(rng.integers(1, n + 1))
    scores, utility = rng.integers(0, 3, n).astype(float), rng.random(n)  # ties on purpose
    assert best_of_k_lift(scores, utility, k) == pytest.approx(brute_force_lift(scores, utility, k), abs=1e-12)
    assert best_of_k_lift(np.zeros(n), utility, k) == pytest.approx(0.0, abs=1e-12)  # a constant scorer adds nothing
    assert best_of_k_lift(utility, utility, k) >= -1e-12  # the oracle never loses to a random pick


def math_pool(n: int, seed: int, carrier: str):
    """``n`` valid math tasks with labels carried by the answer's size (``features``) or by one activation
    dimension alone (``activations``: answers, texts and every cheap feature independent of the label)."""
    rng = np.random.default_rng(seed)
    labels = rng.random(n) < 0.4
    tasks, texts = [], []
    for i, y in enumerate(labels):
        a, b = int(rng.integers(2, 40)), int(rng.integers(2, 40))
        if carrier == "features":  # in-band tasks have small answers, the others large ones
            expression = f"{a} + {b}" if y else f"{a * 7} * {b + 11}"
        else:
            expression = f"{a} + {b}" if rng.random() < 0.5 else f"{a * 7} * {b + 11}"
        problem = f"Item {i}: numbers {expression.replace('+', 'and').replace('*', 'and')}. Combine them."
        task = Task("math_expression", {"problem": problem, "expression": expression})
        task.data["answer"] = int(eval(expression))  # noqa: S307 - our own arithmetic
        tasks.append(task)
        texts.append(f"Problem: {problem}\nExpression: {expression}")
    x = torch.randn(n, 16, generator=torch.Generator().manual_seed(seed))
    if carrier == "activations":
        x[:, 3] += torch.as_tensor(labels, dtype=torch.float32) * 4.0
    rows = LabeledRows(
        rows=np.arange(n), labels=torch.as_tensor(labels, dtype=torch.float32),
        solve_counts=torch.full((n,), float("nan")), groups=None, ids=[str(i) for i in range(n)],
    )  # fmt: skip
    return tasks, texts, x, rows, labels.astype(float)


SWEEP = SweepSpec(archs=("linear",), balances=("weighted",), seeds=(0,), lr=1e-2, loop=LoopSpec(patience=15))
"""A linear head that learns on 150 rows (the paper's lr 1e-3 with patience 5 stops before a head this small moves)."""


@pytest.mark.parametrize(("carrier", "winner"), [("features", {"features", "zero_fit"}), ("activations", {"probe"})])
def test_selection_picks_what_carries_the_label(carrier, winner):
    tasks, texts, x, rows, utility = math_pool(150, seed=1, carrier=carrier)
    spec = RivalSpec(k=4, shuffles=5, n_resamples=200)
    result = compete(MathExpressionDomain(), tasks, texts, x, rows, utility, SWEEP, "linear", "weighted", spec)
    assert result["reward"] in winner, result["lifts"]
    lifts = result["lifts"]
    if carrier == "activations":  # the probe beats its rivals and its shuffled-label null
        assert lifts["probe"]["low"] > 0 and result["probe_minus_best_rival"]["low"] > 0
        assert result["null"]["p_value"] <= 1 / 6 + 1e-9 and result["incremental_over_features"]["low"] > 0
    else:  # the cheap rule needs no activations; the probe adds nothing over the features
        assert lifts["zero_fit"]["low"] > 0 and result["probe_minus_best_rival"]["estimate"] < 0
    text = markdown(result)
    assert f"**{result['reward']}**" in text and "shuffled labels (x5)" in text


def test_forced_reward_and_refused_kind():
    tasks, texts, x, rows, utility = math_pool(60, seed=2, carrier="features")
    spec = RivalSpec(k=4, shuffles=0, n_resamples=50, reward="probe")
    result = compete(MathExpressionDomain(), tasks, texts, x, rows, utility, SWEEP, "linear", "weighted", spec)
    assert result["reward"] == "probe" and result["forced"]
    with pytest.raises(ValueError, match="rivals.reward"):
        RivalSpec(reward="oracle")


@pytest.mark.parametrize("kind", ["zero_fit", "features", "text"])
def test_a_rival_saved_and_loaded_scores_the_same_and_becomes_a_gated_reward(tmp_path, kind):
    tasks, texts, _, rows, _ = math_pool(80, seed=3, carrier="features")
    domain = MathExpressionDomain()
    ranker = fit_rival(kind, domain, tasks, texts, rows.labels.numpy(), seed=0)
    items = tasks if ranker.reads == "task" else texts
    scores = ranker.score(items)
    ranker.logit_quantiles = logit_quantiles(torch.as_tensor(scores))
    ranker.save(tmp_path / "artifact")
    loaded = load_ranker(tmp_path / "artifact")
    assert isinstance(loaded, RivalRanker) and np.allclose(loaded.score(items), scores)
    reward = ProbeReward(artifact=str(tmp_path / "artifact"))
    samples = [
        Sample("", "", valid=True, task=t, info={"task_text": s}) for t, s in zip(tasks[:6], texts[:6], strict=True)
    ]
    samples.append(Sample("", "junk", valid=False))
    got = reward(samples)
    floor = reward.floor
    assert floor < scores.min() and got[-1] == pytest.approx(floor)  # invalid: the floor below every pool score
    assert torch.allclose(got[:6], torch.maximum(torch.as_tensor(scores[:6], dtype=torch.float32),
                                                 torch.tensor(floor + reward.floor_margin)))  # fmt: skip
