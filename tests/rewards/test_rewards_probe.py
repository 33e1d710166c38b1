"""Probe reward compositions with a real (tiny) activation probe: mean-pooled hidden states -> linear head."""

from __future__ import annotations

import pytest
import torch

from propel.probes.gate import GateSpec
from propel.records import Sample
from propel.rewards import (
    CombinedReward,
    FunctionReward,
    ProbeReward,
    Reward,
    RewardComponent,
    RewardContext,
    constrained,
    worst_case,
)


class TinyLinearProbe:
    """A real scorer: mean of the tiny model's last hidden layer over tokens, then a fixed random linear head."""

    def __init__(self, model, tokenizer, seed: int):
        self.model, self.tokenizer = model, tokenizer
        g = torch.Generator().manual_seed(seed)
        self.w = torch.randn(model.config.hidden_size, generator=g)
        self.b = float(torch.randn(1, generator=g))

    @torch.no_grad()
    def logits(self, texts: list[str]) -> torch.Tensor:
        enc = self.tokenizer(texts, return_tensors="pt", padding=True)
        hidden = self.model(**enc, output_hidden_states=True).hidden_states[-1]
        m = enc["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * m).sum(1) / m.sum(1)
        return 10 * (pooled @ self.w) + self.b


@pytest.fixture()
def probes(tiny_model):
    model, tok = tiny_model
    return [TinyLinearProbe(model, tok, seed) for seed in (0, 1, 2)]


SAMPLES = [
    Sample(prompt="P: ", completion="2 + 3 * 4", valid=True),
    Sample(prompt="P: ", completion="garbage ((", valid=False),
    Sample(prompt="P: ", completion="7 * 6 - 1", valid=True),
    Sample(prompt="P: ", completion="(9 - 2) / 7", valid=True),
]


def _single(probe, text: str) -> float:
    return float(probe.logits([text])[0])


def test_hard_gate(probes):
    r = ProbeReward(probes[0], gate=GateSpec(floor=-100.0))(SAMPLES)  # below these probes' logits: none is lifted
    assert r[1].item() == -100.0
    for i in (0, 2, 3):
        assert r[i].item() == pytest.approx(_single(probes[0], SAMPLES[i].completion), abs=1e-4)
    assert len(set(r.tolist())) == 4  # the probe actually discriminates


def test_soft_gate_and_probe_only(probes):
    soft = ProbeReward(probes[0], gate=GateSpec(mode="soft_gate", soft_clip=(0.05, 0.95), floor=0.0))(SAMPLES)
    raw = ProbeReward(probes[0], gate=GateSpec(mode="probe_only"))(SAMPLES)
    assert soft[1].item() == 0.0
    want = torch.sigmoid(raw).clamp(0.05, 0.95)
    torch.testing.assert_close(soft[[0, 2, 3]], want[[0, 2, 3]], atol=1e-5, rtol=0)
    assert raw[1].item() == pytest.approx(_single(probes[0], SAMPLES[1].completion), abs=1e-4)


def test_worst_case_and_constraint_are_minimum_over_probes(probes):
    each = torch.stack([ProbeReward(p, gate=GateSpec(mode="probe_only"))(SAMPLES) for p in probes])
    wco = ProbeReward(worst_case(probes), gate=GateSpec(mode="probe_only"))(SAMPLES)
    torch.testing.assert_close(wco, each.min(0).values)
    con = ProbeReward(constrained(probes[0], probes[1]), gate=GateSpec(floor=-100.0))(SAMPLES)
    assert con[1].item() == -100.0
    torch.testing.assert_close(con[[0, 2, 3]], each[:2].min(0).values[[0, 2, 3]])


def test_plain_callable_probe_and_no_valid_samples():
    reward = ProbeReward(lambda texts: torch.tensor([float(len(t)) for t in texts]))
    assert reward(SAMPLES).tolist() == [9.0, -1.0, 9.0, 11.0]
    assert reward([Sample("p", "x", valid=False)]).tolist() == [-1.0]


@pytest.mark.parametrize("mode", ["hard_gate", "soft_gate", "probe_only"])
def test_same_reward_as_the_sweeps_rvp(mode):
    """The exact RL reward exists once: ProbeReward and the sweep's RVPSample agree for the same logits/validity."""
    from propel.probes.sweep_spec import RVPSample

    logits = torch.tensor([2.0, -0.5, 0.1, -3.0, 0.7, 1.5])
    valid = torch.tensor([True, False, True, True, False, True])
    samples = [Sample(prompt="p", completion=str(i), valid=bool(v)) for i, v in enumerate(valid)]
    gate = GateSpec(mode=mode, floor=-4.0, soft_clip=(0.1, 0.9))
    reward = ProbeReward(lambda texts: logits[[int(t) for t in texts]], gate=gate)(samples)
    sample = RVPSample({"layer1/mean_full": torch.eye(6)}, valid, group_size=3, gate=gate)
    rvp_rewards = sample.rewards("layer1/mean_full", lambda x: x @ logits)
    torch.testing.assert_close(reward, rvp_rewards, rtol=0, atol=0)
    assert sample.score("layer1/mean_full", lambda x: x @ logits) == pytest.approx(
        (reward.double().var(correction=0).item(), reward.double().reshape(2, 3).var(1, correction=0).mean().item())
    )


def test_default_text_is_the_rendered_task():
    """Every config reads the domain's rendering of the task (what the probe was trained on), so it is the default."""
    seen = []
    reward = ProbeReward(lambda texts: seen.extend(texts) or torch.zeros(len(texts)))
    assert reward.text == "task"
    reward([Sample(prompt="P", completion="raw", info={"task_text": "rendered"}), Sample(prompt="P", completion="c")])
    assert seen == ["rendered", "c"]


def test_combined_reward_weights_and_logs_each_component(probes):
    probe = ProbeReward(probes[0], name="probe")
    length = FunctionReward("short", lambda s: -len(s.completion) / 10, weight=0.5)
    assert isinstance(probe, RewardComponent) and isinstance(length, RewardComponent)
    out = CombinedReward([probe, length])(SAMPLES)
    torch.testing.assert_close(out.total, out.components["probe"] + 0.5 * out.components["short"])
    stats = out.stats()
    assert set(stats) == {
        "reward/mean",
        "reward/std",
        "reward/probe/mean",
        "reward/probe/std",
        "reward/short/mean",
        "reward/short/std",
        "reward/probe/unscored",
        "reward/short/unscored",
        "reward/probe/seconds",
        "reward/short/seconds",
        "reward/seconds_per_sample",
    }
    assert stats["reward/short/mean"] == pytest.approx(-sum(len(s.completion) for s in SAMPLES) / 40)


def test_bad_inputs():
    with pytest.raises(ValueError, match="mode"):
        ProbeReward(lambda t: t, gate=GateSpec(mode="gate"))
    with pytest.raises(ValueError, match="unique"):
        CombinedReward([FunctionReward("a", len), FunctionReward("a", len)])
    with pytest.raises(ValueError, match="returned 1 values"):
        CombinedReward([_Wrong()])(SAMPLES)


class _Wrong(Reward):
    name, weight = "wrong", 1.0

    def __call__(self, samples):
        return torch.zeros(1)


def _artifact(folder, model_dir, seed):
    from propel.probes.artifact import ProbeArtifact
    from propel.probes.heads import ProbeHead

    torch.manual_seed(seed)
    ProbeArtifact(ProbeHead("linear", 64), str(model_dir), 1, "mean_full").save(folder)
    return str(folder)


def test_artifact_ensemble_and_constraint_take_the_minimum(tiny_model_dir, tmp_path):
    """From config, a list of artifacts is WCO and ``constraint`` an auxiliary probe: both are the per-sample
    minimum of the single probes' logits, with one shared reference model."""
    a, b = _artifact(tmp_path / "a", tiny_model_dir, 0), _artifact(tmp_path / "b", tiny_model_dir, 1)
    samples = [Sample(prompt="p", completion=f"task number {i} " * (i + 1)) for i in range(6)]
    samples.append(Sample(prompt="p", completion="broken", valid=False))
    single = [ProbeReward(artifact=f)(samples) for f in (a, b)]
    assert not torch.equal(single[0][:6], single[1][:6])
    want = torch.minimum(single[0], single[1])
    wco = ProbeReward(artifact=[a, b])
    torch.testing.assert_close(wco(samples), want)
    assert len(wco._references) == 1  # two probes, one frozen reference copy
    torch.testing.assert_close(ProbeReward(artifact=a, constraint=b)(samples), want)
    assert ProbeReward(artifact=[a, b])(samples)[-1] == -1.0  # the gate still applies
    zero = ProbeReward(probe=lambda texts: torch.zeros(len(texts)), constraint=b)(samples)
    torch.testing.assert_close(zero[:6], single[1][:6].clamp(max=0.0))
    with pytest.raises(ValueError, match="empty list"):
        ProbeReward(artifact=[])


def test_setup_shares_the_policy_as_reference(tiny_model_dir, tiny_model, tmp_path):
    """``setup(context)`` offers the trainer's policy: an artifact on the same base model reads it, loading nothing."""
    a = _artifact(tmp_path / "a", tiny_model_dir, 0)
    samples = [Sample(prompt="p", completion=f"task number {i} " * (i + 1)) for i in range(4)]
    model, tok = tiny_model
    shared = ProbeReward(artifact=a)
    shared.setup(RewardContext(policy=model, tokenizer=tok, model_name=str(tiny_model_dir)))
    assert shared._built and shared._references == {}  # built at setup, from the policy: no frozen copy
    torch.testing.assert_close(shared(samples), ProbeReward(artifact=a)(samples))
    own = ProbeReward(artifact=a, share_policy=False)
    own.setup(RewardContext(policy=model, tokenizer=tok, model_name=str(tiny_model_dir)))
    assert len(own._references) == 1
