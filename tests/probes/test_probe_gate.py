"""The exact RL reward (``gated_reward``): hard gate, soft gate, probe only, and what the probe must score."""

import pytest
import torch

from propel.probes.gate import PROBE_MODES, GateSpec, gated_reward, needs_logit

LOGITS = torch.tensor([2.0, -0.5, 0.1, -3.0])
VALID = torch.tensor([True, False, True, True])


def test_hard_gate():
    out = gated_reward(torch.tensor([2.0, -0.5, 0.1]), torch.tensor([True, False, True]), GateSpec(floor=-1.0))
    assert out.tolist() == pytest.approx([2.0, -1.0, 0.1])
    assert out.dtype == torch.float32


def test_soft_gate_and_probe_only():
    soft = gated_reward(LOGITS, VALID, GateSpec(mode="soft_gate", floor=0.0, soft_clip=(0.05, 0.95)))
    want = torch.sigmoid(LOGITS).clamp(0.05, 0.95)
    assert soft[1].item() == 0.0
    torch.testing.assert_close(soft[[0, 2, 3]], want[[0, 2, 3]])
    torch.testing.assert_close(gated_reward(LOGITS, VALID, GateSpec(mode="probe_only")), LOGITS)


def test_unread_logits_may_be_nan():
    """The probe need not score invalid tasks: the gate never reads their logits."""
    logits = torch.where(VALID, LOGITS, torch.tensor(float("nan")))
    for mode in ("hard_gate", "soft_gate"):
        out = gated_reward(logits, VALID, GateSpec(mode=mode, floor=-2.0))
        assert torch.isfinite(out).all() and out[1].item() == -2.0
    assert needs_logit(VALID, "hard_gate").tolist() == VALID.tolist()
    assert needs_logit(VALID, "probe_only").all()


def test_bad_settings():
    assert PROBE_MODES == ("hard_gate", "soft_gate", "probe_only")
    with pytest.raises(ValueError, match="mode"):
        gated_reward(LOGITS, VALID, GateSpec(mode="gate"))
    with pytest.raises(ValueError, match="soft_clip"):
        gated_reward(LOGITS, VALID, GateSpec(mode="soft_gate", soft_clip=(0.9, 0.1)))
    with pytest.raises(ValueError, match="differ in length"):
        gated_reward(LOGITS, VALID[:2], GateSpec(floor=-1.0))
    with pytest.raises(ValueError, match="needs a floor"):
        gated_reward(LOGITS, VALID, GateSpec())


def test_the_hard_gate_lifts_valid_rewards_to_the_floor_plus_a_margin():
    """On-policy valid tasks can score below the pool minimum the floor was set from; the hard gate passes the logit
    through, so without a clamp such a valid task would earn less than an invalid one."""
    from propel.probes.gate import VALID_MARGIN

    logits = torch.tensor([-7.0, -0.5, 0.3, float("nan")])
    valid = torch.tensor([True, True, True, False])
    out = gated_reward(logits, valid, GateSpec(mode="hard_gate", floor=-2.0))
    assert out.tolist() == pytest.approx([-2.0 + VALID_MARGIN, -0.5, 0.3, -2.0])
    assert float(out[valid].min()) >= -2.0 + VALID_MARGIN > float(out[~valid].max())
