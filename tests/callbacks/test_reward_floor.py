"""RewardFloorCheck and RVPSelection's fit-start check: few valid samples may sit under the invalid floor."""

from __future__ import annotations

import warnings

import pytest
import torch
from lightning.pytorch import LightningModule, Trainer

from propel.callbacks.reward_floor import RewardFloorCheck
from propel.callbacks.rvp import RVPSelection
from propel.errors import ConfigError
from propel.lit_modules.state import RolloutState
from propel.probes.gate import GateSpec, logit_quantiles
from propel.records import Sample
from propel.rewards.combine import CombinedReward
from propel.rewards.probe_reward import ProbeReward


class LowProbe:
    """A probe whose logits on valid tasks all lie in [-4, -2): below the old fixed floor of -1."""

    logit_quantiles = logit_quantiles(torch.linspace(-4.0, -2.0, 50))

    def logits(self, texts):
        return torch.tensor([-4.0 + (len(t) % 7) / 4 for t in texts])


class Publisher(LightningModule):
    """The smallest trainer that publishes scored rollouts: one step = 8 samples (2 invalid) + a tiny SGD step."""

    def __init__(self, reward: ProbeReward):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.reward = CombinedReward([reward])
        self.rollout_state = None

    def training_step(self, batch, batch_idx):
        samples = [Sample("p", f"task {batch_idx} {'x' * i}", valid=i < 6) for i in range(8)]
        self.rollout_state = RolloutState(step=self.global_step, samples=samples, rewards=self.reward(samples))
        return (self.w**2).sum() + batch.sum() * 0

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.zeros(16, 1), batch_size=1)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(module, callbacks, max_steps=5) -> Trainer:
    trainer = Trainer(
        max_steps=max_steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=callbacks,
    )
    trainer.fit(module)
    return trainer


def test_check_fires_for_a_floor_set_too_high_and_not_for_the_default():
    check = RewardFloorCheck(every_n_steps=2)
    with pytest.warns(UserWarning, match="valid samples score below the invalid floor"):
        _fit(Publisher(ProbeReward(LowProbe(), gate=GateSpec(floor=-1.0))), [check])
    assert [step for step, _, _ in check.checks] == [0, 2, 4]  # the first step, then every 2
    step, name, result = check.checks[0]
    assert name == "probe" and not result.ok and result.floor == -1.0 and result.n_valid == 6
    assert result.below == 1.0 and result.mean_valid == pytest.approx(-0.5)  # every logit under it, lifted to -1 + 0.5

    default = RewardFloorCheck(every_n_steps=1)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*invalid floor.*")
        _fit(Publisher(ProbeReward(LowProbe())), [default])
    assert len(default.checks) == 5 and all(c.ok for _, _, c in default.checks)
    assert default.checks[0][2].floor < -4.0


def test_stop_ends_training_at_the_first_failed_check():
    trainer = _fit(Publisher(ProbeReward(LowProbe(), gate=GateSpec(floor=-1.0))), [RewardFloorCheck(action="stop")])
    assert trainer.global_step == 1


def test_rvp_sample_is_checked_at_fit_start():
    gens = [[f"ctx{c} task {'y' * g}" for g in range(4)] for c in range(3)]
    valid = [[g < 3 for g in range(4)] for _ in range(3)]
    high = RVPSelection(gens, reward_fn=ProbeReward(LowProbe(), gate=GateSpec(floor=-1.0)), valid=valid)
    with pytest.warns(UserWarning, match="RVP sample at fit start: 100% of 9 valid samples score below"):
        _fit(Publisher(ProbeReward(LowProbe())), [high], max_steps=1)
    assert not high.floor_check.ok and high.floor_check.n_valid == 9
    ok = RVPSelection(gens, reward_fn=ProbeReward(LowProbe()), valid=valid, floor_action="stop")
    trainer = _fit(Publisher(ProbeReward(LowProbe())), [ok], max_steps=2)
    assert ok.floor_check.ok and trainer.global_step == 2


def test_bad_settings():
    with pytest.raises(ConfigError, match="action"):
        RewardFloorCheck(action="explode")
    with pytest.raises(ConfigError, match="every_n_steps"):
        RewardFloorCheck(every_n_steps=0)
    with pytest.raises(ConfigError, match="no reward component named"):
        _fit(Publisher(ProbeReward(LowProbe())), [RewardFloorCheck(components=["nope"])], max_steps=1)


class MostlyHighProbe:
    """Valid tasks mostly far above the floor, three in ten far below it: the mean sits well above the floor."""

    logit_quantiles = logit_quantiles(torch.linspace(-1.0, 1.0, 50))

    def logits(self, texts):
        return torch.tensor([-10.0 if i % 10 < 3 else 5.0 for i, _ in enumerate(texts)])


def test_the_check_compares_the_share_of_valid_samples_under_the_floor_not_the_mean():
    """The mean of valid rewards can sit far above the floor while a third of the valid samples sit under it (their
    logits below the floor: the gate lifts them to floor + margin, where the reward can no longer rank them)."""
    from propel.probes.gate import check_floor

    valid = torch.ones(10, dtype=torch.bool)
    rewards = torch.tensor([5.0] * 7 + [-10.0] * 3)  # a reward without the clamp: mean 0.5, floor -2
    check = check_floor(rewards, valid, -2.0)
    assert check.mean_valid > -2.0 and check.below == pytest.approx(0.3) and not check.ok

    reward = ProbeReward(MostlyHighProbe())
    samples = [Sample("p", f"t{i}") for i in range(10)]
    r = reward(samples)
    assert float(r.mean()) > reward.floor
    check = check_floor(r, valid, reward.floor, reward.floor_margin)
    assert check.below == pytest.approx(0.3) and not check.ok
    floor_check = RewardFloorCheck(every_n_steps=1)
    with pytest.warns(UserWarning, match="50% of 6 valid samples score below the invalid floor"):
        _fit(Publisher(ProbeReward(MostlyHighProbe())), [floor_check], max_steps=1)
