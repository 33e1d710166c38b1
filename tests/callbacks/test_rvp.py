"""RVPSelection: scoring and ranking rewards, the exact (gated) RL reward, and logging at fit start."""

import pytest
import torch
from lightning.pytorch import Trainer

from propel.callbacks.rvp import RVPSelection
from propel.probes.gate import GateSpec, gated_reward
from propel.probes.selection import rvp
from propel.rewards.probe_reward import ProbeReward


def length_reward(texts):
    return torch.tensor([float(len(t)) for t in texts])


def test_rvp_callback_scores_and_selects():
    gens = [[f"ctx{c} sample {g}" for g in range(4)] for c in range(3)]

    def constant_reward(texts):
        return torch.zeros(len(texts))

    cb = RVPSelection(gens, reward_fn=length_reward, candidates={"len": length_reward, "const": constant_reward})
    want = rvp(torch.tensor([[float(len(t)) for t in g] for g in gens]))
    assert cb.score(length_reward) == pytest.approx(want)
    assert cb.select() == "len" and cb.results["const"] == (0.0, 0.0)
    with pytest.raises(ValueError, match="same G"):
        RVPSelection([["a", "b"], ["c"]])


def test_needs_an_explicit_reward():
    """No undeclared fallback to an attribute of the LightningModule: a reward or candidates must be given."""
    with pytest.raises(ValueError, match="reward_fn"):
        RVPSelection([["a", "b"]])
    with pytest.raises(ValueError, match="valid"):
        RVPSelection([["a", "b"]], reward_fn=length_reward, valid=[[True]])


@pytest.mark.parametrize("mode", ["hard_gate", "soft_gate", "probe_only"])
def test_probe_reward_is_scored_with_its_gate(mode):
    """Given the run's ProbeReward, RVP is that of the exact RL reward: validity gate and mode included."""
    gens = [[f"task {c}-{g}" + "x" * (3 * g + c) for g in range(4)] for c in range(3)]
    valid = [[g != 1 for g in range(4)] for _ in range(3)]
    reward = ProbeReward(lambda texts: length_reward(texts) / 10, gate=GateSpec(mode=mode, floor=-1.0))
    cb = RVPSelection(gens, reward_fn=reward, valid=valid)
    flat = [t for g in gens for t in g]
    want = gated_reward(length_reward(flat) / 10, torch.tensor(valid).flatten(), GateSpec(mode=mode, floor=-1.0))
    assert cb.score(reward) == pytest.approx(rvp(want.reshape(3, 4)))


def test_rvp_callback_logs_at_fit_start(tmp_path):
    from lightning.pytorch.loggers import CSVLogger

    from propel.datamodules.activations import ActivationDataModule
    from propel.lit_modules.probe_training import ProbeModule
    from propel.testing.probe_data import write_synthetic

    feats, labels = write_synthetic(tmp_path, n=300)
    gens = [[f"c{c} g{g}" * (g + 1) for g in range(4)] for c in range(2)]
    cb = RVPSelection(gens, reward_fn=lambda texts: torch.tensor([float(len(t)) for t in texts]))
    logger = CSVLogger(tmp_path / "logs", name="rvp")
    t = Trainer(
        max_epochs=1,
        logger=logger,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[cb],
    )
    t.fit(ProbeModule(), datamodule=ActivationDataModule(str(feats), str(labels), layer=1, pooling="mean_full"))
    assert cb.results["reward_fn"][0] > 0
    logger.save()
    assert "rvp/overall" in (tmp_path / "logs" / "rvp" / "version_0" / "metrics.csv").read_text()
