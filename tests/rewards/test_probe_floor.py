"""The invalid floor is the worst outcome whatever the probe's logit range.

Real artifacts on the tiny reference model, shifted so every logit on valid tasks is below -1 (the demo's case: 73%
of its valid tasks scored below the old floor of -1, so being invalid paid better).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from propel.probes.artifact import ProbeArtifact, ProbeScorer
from propel.probes.gate import (
    LEGACY_FLOOR,
    VALID_MARGIN,
    GateSpec,
    check_floor,
    default_floor,
    logit_quantiles,
    member_floor,
)
from propel.probes.heads import ProbeHead
from propel.records import Sample
from propel.rewards.probe_reward import ProbeReward
from propel.rewards.reward import RewardContext

POOL = [f"Tom has {i} apples and buys {i + 3} more. How many now? = {2 * i + 3}" for i in range(12)]


def _artifact(folder, model_dir, model, tok, seed: int, top: float, quantiles: bool = True) -> str:
    """A linear probe whose highest logit on ``POOL`` is ``top``; records its pool quantiles unless told not to."""
    torch.manual_seed(seed)
    art = ProbeArtifact(ProbeHead("linear", 64), str(model_dir), 1, "mean_full")
    scorer = ProbeScorer(art, model, tok)
    with torch.no_grad():
        art.head.net[0].bias -= float(scorer.logits(POOL).max()) - top
    logits = scorer.logits(POOL)
    assert float(logits.max()) == pytest.approx(top, abs=1e-4)
    if quantiles:
        art.logit_quantiles = logit_quantiles(logits)
    art.save(folder)
    return str(folder)


def _shared(model_dir, model, tok, **kwargs) -> ProbeReward:
    """A ``ProbeReward`` reading the already loaded tiny model as its reference (as GRPO's setup offers it)."""
    reward = ProbeReward(**kwargs)
    reward.setup(RewardContext(policy=model, tokenizer=tok, model_name=str(model_dir)))
    return reward


def _samples(n_invalid: int = 3) -> list[Sample]:
    valid = [Sample(prompt="p", completion=t, valid=True) for t in POOL]
    return valid + [Sample(prompt="p", completion=f"broken {i} ((", valid=False) for i in range(n_invalid)]


def test_quantiles_and_member_floor_rule():
    q = logit_quantiles(torch.arange(101, dtype=torch.float32) / 10 - 8)  # -8.0 .. 2.0
    assert q["n"] == 101 and q["min"] == pytest.approx(-8.0) and q["max"] == pytest.approx(2.0)
    assert q["q50"] == pytest.approx(-3.0) and q["q25"] == pytest.approx(-5.5) and q["q75"] == pytest.approx(-0.5)
    assert member_floor(q) == pytest.approx(-8.0 - 5.0)  # min minus one interquartile range
    tight = logit_quantiles(torch.full((5,), -3.0))
    assert member_floor(tight) == pytest.approx(-4.0)  # at least 1 below the minimum
    assert default_floor([q, tight]) == pytest.approx(-13.0)  # below every member
    assert default_floor([q], mode="soft_gate", soft_clip=(0.1, 0.9)) == pytest.approx(-0.9)


def test_default_floor_ranks_every_invalid_below_every_valid(tiny_model_dir, tiny_model, tmp_path):
    model, tok = tiny_model
    folder = _artifact(tmp_path / "low", tiny_model_dir, model, tok, seed=0, top=-1.5)
    samples = _samples()
    valid = torch.tensor([s.valid for s in samples])

    high = _shared(tiny_model_dir, model, tok, artifact=folder, gate=GateSpec(floor=-1.0))
    old = high(samples)
    assert (high.last_logits[valid] < -1.0).all()  # the bug: every valid logit is below the invalid floor
    assert (old[valid] == -1.0 + VALID_MARGIN).all()  # the gate lifts them: valid still wins, but unranked
    assert not check_floor(old, valid, -1.0, high.floor_margin).ok

    reward = _shared(tiny_model_dir, model, tok, artifact=folder)
    r = reward(samples)
    assert reward.floor < float(r[valid].min())
    assert float(r[~valid].max()) < float(r[valid].min())  # every invalid below every valid
    assert (r[~valid] == reward.floor).all()
    assert check_floor(r, valid, reward.floor).ok
    torch.testing.assert_close(r[valid], reward.last_logits[valid])  # above the floor, the hard gate keeps the logit


def test_ensemble_and_constraint_floor_below_every_member(tiny_model_dir, tiny_model, tmp_path):
    model, tok = tiny_model
    a = _artifact(tmp_path / "a", tiny_model_dir, model, tok, seed=0, top=-1.5)
    b = _artifact(tmp_path / "b", tiny_model_dir, model, tok, seed=1, top=-9.0)
    floors = [member_floor(ProbeArtifact.load(f).logit_quantiles) for f in (a, b)]
    samples = _samples()
    valid = torch.tensor([s.valid for s in samples])
    for kwargs in ({"artifact": [a, b]}, {"artifact": a, "constraint": b}):
        reward = _shared(tiny_model_dir, model, tok, **kwargs)
        r = reward(samples)
        assert reward.floor == pytest.approx(min(floors))
        assert float(r[~valid].max()) < float(r[valid].min())
    alone = ProbeReward(artifact=a)
    assert alone.floor == pytest.approx(floors[0]) and alone.floor > min(floors)  # b alone would sink below it


def test_explicit_floor_wins_and_old_artifacts_fall_back_with_a_warning(tiny_model_dir, tiny_model, tmp_path):
    model, tok = tiny_model
    folder = _artifact(tmp_path / "old", tiny_model_dir, model, tok, seed=0, top=3.0, quantiles=False)
    assert ProbeArtifact.load(folder).logit_quantiles is None
    with pytest.warns(UserWarning, match=f"probe artifact {folder}: no logit quantiles"):
        assert ProbeReward(artifact=folder).floor == LEGACY_FLOOR
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ProbeReward(artifact=folder, gate=GateSpec(floor=-50.0)).floor == -50.0
        assert ProbeReward(artifact=folder, gate=GateSpec(mode="probe_only")).floor is None
        assert ProbeReward(
            artifact=folder, gate=GateSpec(mode="soft_gate", soft_clip=(0.05, 0.95))
        ).floor == pytest.approx(-0.95)


def test_injected_probe_reads_its_recorded_quantiles():
    class Probe:
        logit_quantiles = logit_quantiles(torch.tensor([-6.0, -4.0, -3.0, -2.0, -1.5]))

        def logits(self, texts):
            return torch.tensor([-6.0 + len(t) % 3 for t in texts])

    reward = ProbeReward(Probe())
    assert reward.floor == pytest.approx(-6.0 - 2.0)  # min minus IQR (-2 - -4)
    r = reward(_samples())
    assert float(r[-3:].max()) < float(r[:-3].min())
