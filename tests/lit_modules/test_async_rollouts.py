"""Asynchronous rollouts: the next batches are sampled while one trains, never more than
``max_staleness`` optimizer steps behind, and the importance weights correct for the staleness.

The engine stands in for vLLM: it samples from its own copy of the policy, updated only when the trainer syncs it
(so a rollout sampled ahead really comes from older weights), and reports its own logprobs.
"""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from propel.datamodules.contexts import ContextDataModule
from propel.engines.engine import Engine
from propel.engines.hf import HFEngine
from propel.errors import ConfigError
from propel.lit_modules.grpo import GRPOModule
from tests.lit_modules.test_grpo_module import LetterDomain, LossSpy, _module, _trainer


class SnapshotEngine(Engine):
    """Samples from a copy of the policy that changes only on ``update_weights`` (as a vLLM engine's adapter does)."""

    def __init__(self, policy, tokenizer) -> None:
        self.copy, self.tokenizer = copy.deepcopy(policy), tokenizer
        self.inner = HFEngine(self.copy, tokenizer)
        self.synced_steps: list[int] = []

    def update_weights(self, policy) -> None:
        own = dict(self.copy.named_parameters())
        with torch.no_grad():
            for name, p in policy.named_parameters():
                own[name].copy_(p)

    def generate(self, prompts, sampling):
        return self.inner.generate(prompts, sampling)


class SnapshotGRPO(GRPOModule):
    def setup_policy(self):
        super().setup_policy()
        self.engine = SnapshotEngine(self.policy, self.tokenizer)


class Versions(Callback):
    """(optimizer step, step of the weights that sampled it, batch index) of every training step."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, int]] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        state = pl_module.rollout_state
        self.rows.append((state.step, state.policy_version, batch.index))
        assert float(trainer.callback_metrics["train/staleness"]) == state.step - state.policy_version

    @property
    def staleness(self) -> list[int]:
        return [step - version for step, version, _ in self.rows]


def _fit(model_dir, steps, callbacks=(), ckpt_path=None, **kw):
    pl.seed_everything(0)
    module = _module(model_dir, SnapshotGRPO, max_new_tokens=2, async_rollouts=True, **kw)
    versions = Versions()
    trainer = _trainer(steps, [versions, *callbacks])
    trainer.fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2), ckpt_path=ckpt_path)
    return module, versions


def test_one_step_ahead_is_one_step_stale_and_importance_weighted(peaked_model_dir, monkeypatch):
    spy = LossSpy(monkeypatch)
    module, versions = _fit(peaked_model_dir, 6, max_staleness=1, micro_batch_size=16)
    st = versions.staleness
    assert len(st) == 6 and st[0] == 0 and max(st) <= 1
    assert st.count(1) >= 4, st  # batch k+1 was sampled while k trained: before k's update
    assert module.async_rollouts._prefetcher is None  # closed at the end of fit
    # One loss call per step (one micro-batch). The engine's copy equals the policy at staleness 0, so the
    # importance weights are 1 there; a step behind, they carry the ratio of the current policy to the older one.
    assert len(spy.calls) == 6
    for staleness, call in zip(st, spy.calls, strict=True):
        w = call["is_weights"]
        assert w is not None
        if staleness == 0:
            torch.testing.assert_close(w, torch.ones_like(w), atol=1e-4, rtol=0)
        else:
            assert (w - 1).abs().max() > 1e-3 and call["stats"]["is_weight_mean"] != pytest.approx(1.0, abs=1e-4)


def test_staleness_never_exceeds_the_setting(peaked_model_dir):
    _, two_ahead = _fit(peaked_model_dir, 6, max_staleness=2)
    assert max(two_ahead.staleness) == 2 and all(s <= 2 for s in two_ahead.staleness), two_ahead.staleness
    # Two optimizer steps per batch: one batch ahead is already two steps old.
    _, epochs = _fit(peaked_model_dir, 6, max_staleness=2, ppo_epochs=2)
    assert all(s <= 2 for s in epochs.staleness) and 2 in epochs.staleness, epochs.staleness
    with pytest.raises(ConfigError, match="max_staleness=1 is below the 2 optimizer steps"):
        _fit(peaked_model_dir, 2, max_staleness=1, ppo_epochs=2)


def test_a_checkpoint_with_a_batch_in_flight_resumes_at_that_batch(peaked_model_dir, tmp_path):
    ckpt = ModelCheckpoint(dirpath=tmp_path, save_last=True, every_n_train_steps=3)
    _, first = _fit(peaked_model_dir, 3, [ckpt], max_staleness=1)
    _, resumed = _fit(
        peaked_model_dir, 6, [ModelCheckpoint(dirpath=tmp_path / "resumed")], ckpt_path=str(tmp_path / "last.ckpt")
    )
    assert [i for *_, i in first.rows] == [0, 1, 2]  # batch 3 was being sampled when the checkpoint was written
    assert [i for *_, i in resumed.rows] == [3, 4, 5]
    assert resumed.staleness[0] == 0 and max(resumed.staleness) <= 1  # re-sampled with the restored weights


def test_a_failed_fit_stops_the_worker(peaked_model_dir):
    """An error in a training step (here the reward's, at step 2) stops the worker: no batch is sampled after it."""
    import threading

    from propel.rewards import FunctionReward

    calls = []

    def failing(sample) -> float:
        calls.append(1)
        if len(calls) > 2 * 16:  # 16 samples per step: steps 0 and 1 score, step 2 raises (a ConfigError: any other
            raise ConfigError("reward server misconfigured")  # exception only makes the reward judge nothing)
        return float(len(calls) % 2)  # rewards that vary within a group

    pl.seed_everything(0)
    module = _module(
        peaked_model_dir, SnapshotGRPO, max_new_tokens=2, async_rollouts=True, rewards=[FunctionReward("f", failing)]
    )
    with pytest.raises(ConfigError, match="reward server misconfigured"):
        _trainer(6).fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2))
    assert module.async_rollouts._prefetcher is None
    for thread in [t for t in threading.enumerate() if t.name.startswith("propel-rollouts")]:
        thread.join(timeout=30)  # the batch being sampled when the error came finishes; nothing is queued after it
    assert not [t for t in threading.enumerate() if t.name.startswith("propel-rollouts")]


def test_async_settings_are_checked(peaked_model_dir):
    with pytest.raises(ConfigError, match="keep importance_correction on"):
        _module(peaked_model_dir, async_rollouts=True, importance_correction=False)
    with pytest.raises(ConfigError, match="max_staleness must be >= 1"):
        _module(peaked_model_dir, max_staleness=0)
    module = _module(peaked_model_dir, async_rollouts=True)  # the hf engine: generate on the live policy
    with pytest.raises(ConfigError, match="not the live policy"):
        _trainer(1).fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2))


def test_trainers_without_an_off_policy_correction_refuse_async():
    """The turn-KL term is on-policy by construction: its trainers refuse async rollouts at construction."""
    from propel.lit_modules.grpo_turn_kl import GRPOTurnKLModule
    from propel.rollouts.hints import ErrorHints

    with pytest.raises(ConfigError, match="GRPOTurnKLModule does not correct for rollouts sampled by older weights"):
        GRPOTurnKLModule(hints=ErrorHints(), async_rollouts=True)
