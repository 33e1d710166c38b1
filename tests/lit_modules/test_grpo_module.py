"""GRPOModule + ContextDataModule on a tiny random model: learning signal, LoRA-only checkpoints, exact resume."""

from __future__ import annotations

import math

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from propel.datamodules.contexts import ContextDataModule
from propel.domains.interface import Domain, ParseFailure, Verdict
from propel.engines.engine import Engine
from propel.lit_modules.grpo import GRPOModule
from propel.losses.policy_gradient import LossSpec
from propel.models.lora import LoRASpec
from propel.records import Context, Prompt, Sample, Task
from propel.rewards import FunctionReward

WORDS = ["alpha", "table", "river", "stone", "cloud", "north", "green", "metal"]


class LetterDomain(Domain):
    """Raw-text prompts; a completion is a task when it is non-blank, valid when longer than one character."""

    name, needs_sandbox = "letters", False

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        g = torch.Generator().manual_seed(seed)
        words = [WORDS[int(torch.randint(len(WORDS), (1,), generator=g))] for _ in range(n)]
        return [Context(id=f"{seed}-{i}", prompt=Prompt(text=f"Word: {w}\n")) for i, w in enumerate(words)]

    def parse(self, completion: str):
        text = completion.strip()
        return Task(self.name, {"text": text}) if text else ParseFailure("blank")

    def validity(self, tasks, sandbox=None) -> list[Verdict]:
        return [Verdict(len(t.data["text"]) > 1, "ok") for t in tasks]

    def solver_prompt(self, task):
        return Prompt(text=task.data["text"])

    def grade(self, task, completions, sandbox=None) -> list[bool]:
        return [c.strip() == task.data["text"] for c in completions]

    def topic(self, task) -> str:
        return task.data["text"][0]


def share_of_a(sample) -> float:
    """Reward: the share of characters that are the letter 'a'."""
    return sample.completion.count("a") / max(1, len(sample.completion))


class Record(Callback):
    def __init__(self):
        self.rows: list[dict[str, float]] = []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        m = trainer.callback_metrics
        self.rows.append({k: float(m[k]) for k in ("train/loss", "train/reward/mean", "train/kl") if k in m})


def _module(model_dir, cls=GRPOModule, **overrides) -> GRPOModule:
    kwargs = dict(
        model=str(model_dir),
        rewards=[FunctionReward("a_share", share_of_a)],
        lora=LoRASpec(r=8, alpha=16),
        group_size=8,
        max_new_tokens=1,
        lr=2e-2,
        micro_batch_size=6,
        loss=LossSpec(beta=0.04),
    )
    kwargs.update(overrides)
    return cls(**kwargs)


def _trainer(max_steps, callbacks=(), **kw) -> pl.Trainer:
    return pl.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=list(callbacks),
        enable_checkpointing=any(isinstance(c, ModelCheckpoint) for c in callbacks),
        **kw,
    )


def _expected_reward(module: GRPOModule, token_reward: torch.Tensor) -> float:
    """Exact E[reward] of a one-token completion: sum over the vocabulary of p(token) * reward(token)."""
    tok = module.tokenizer
    enc = tok([f"Word: {w}\n" for w in WORDS], return_tensors="pt", padding=True)
    module.policy.eval()
    with torch.no_grad():
        probs = torch.softmax(module.policy(**enc).logits[:, -1].float(), dim=-1)
    module.policy.train()
    return float((probs @ token_reward).mean())


def test_expected_reward_increases_and_logs(peaked_model_dir):
    pl.seed_everything(0)
    module, rec = _module(peaked_model_dir), Record()
    module.configure_model()
    tok = module.tokenizer
    token_reward = torch.tensor(
        [share_of_a(Sample("", tok.decode([i], skip_special_tokens=True))) for i in range(len(tok))]
    )
    before = _expected_reward(module, token_reward)
    _trainer(8, [rec]).fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2))
    after = _expected_reward(module, token_reward)
    assert after > 1.15 * before, (before, after)
    assert len(rec.rows) == 8 and all(r["train/kl"] >= 0 for r in rec.rows)
    assert len(module.rollout_state.samples) == 16 and module.rollout_state.step == 7
    frozen = [p for n, p in module.policy.named_parameters() if "lora_" not in n]
    assert frozen and not any(p.requires_grad for p in frozen)


def test_checkpoint_holds_only_lora_and_resume_is_exact(peaked_model_dir, tmp_path):
    def run(max_steps, ckpt_path=None, save=False):
        pl.seed_everything(0)
        rec = Record()
        callbacks = [rec]
        if save:
            callbacks.append(ModelCheckpoint(dirpath=tmp_path, every_n_train_steps=4, save_top_k=-1))
        module = _module(peaked_model_dir, max_new_tokens=3, loss=LossSpec(loss_type="dapo"), ppo_epochs=2)
        trainer = _trainer(max_steps, callbacks)
        trainer.fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2), ckpt_path=ckpt_path)
        return rec.rows, module

    full, full_module = run(8)  # 4 batches x 2 PPO inner iterations = 8 optimizer steps
    first, _ = run(4, save=True)
    ckpt_file = tmp_path / "epoch=0-step=4.ckpt"
    ckpt = torch.load(ckpt_file, weights_only=False)
    assert ckpt["state_dict"] and all("lora_" in k for k in ckpt["state_dict"])
    assert ckpt["optimizer_states"] and ckpt["ContextDataModule"]["next_index"] == 2
    resumed, resumed_module = run(8, ckpt_path=str(ckpt_file))
    assert len(full) == 4 and len(first) == 2 and len(resumed) == 2
    for want, got in zip(full, first + resumed, strict=True):
        assert got == pytest.approx(want, rel=1e-5, abs=1e-6)
    for (name, p), (_, q) in zip(
        full_module.policy.named_parameters(), resumed_module.policy.named_parameters(), strict=True
    ):
        torch.testing.assert_close(p, q, msg=name)


def test_bad_arguments():
    with pytest.raises(ValueError, match="group_size"):
        GRPOModule(group_size=1)
    with pytest.raises(ValueError, match="ppo_epochs"):
        GRPOModule(ppo_epochs=0)


# ---------------------------------------------------------------------------------------------- training defects
class ShiftedEngine(Engine):
    """The live policy's HF engine seen as a foreign engine (as vLLM is) whose logprobs are off by ``shift``."""

    def __init__(self, inner, shift: float):
        self.inner, self.shift, self.tokenizer = inner, shift, inner.tokenizer

    def generate(self, prompts, sampling):
        out = self.inner.generate(prompts, sampling)
        for c in (c for group in out for c in group):
            c.logprobs = [x + self.shift for x in c.logprobs]
        return out


class LossSpy:
    """Records the arguments of each ``policy_loss`` call inside ``GRPOModule`` (and returns the real loss)."""

    def __init__(self, monkeypatch):
        import propel.lit_modules.grpo as grpo

        self.calls: list[dict] = []
        real = grpo.policy_loss

        def spy(logp, old_logp, advantages, mask, spec, **kw):
            out = real(logp, old_logp, advantages, mask, spec, **kw)
            self.calls.append({"logp": logp.detach(), "old": old_logp, "adv": advantages, "spec": spec, **kw})
            self.calls[-1]["stats"] = out.stats
            return out

        monkeypatch.setattr(grpo, "policy_loss", spy)


class Constant:
    """A reward that is the same for every sample on ``flat`` steps (zero variance) and ``share_of_a`` otherwise."""

    def __init__(self, samples_per_step: int, flat=lambda step: True):
        self.n, self.calls, self.flat = samples_per_step, 0, flat

    def __call__(self, sample) -> float:
        step, self.calls = self.calls // self.n, self.calls + 1
        return 1.0 if self.flat(step) else share_of_a(sample)


def test_zero_variance_steps_warn_count_and_stop(peaked_model_dir):
    """All-zero-variance steps take no optimizer step; they are warned about, counted and stop the
    run after ``max_steps_without_update`` in a row instead of running forever."""
    from propel.errors import PropelError

    pl.seed_everything(0)
    module = _module(
        peaked_model_dir, rewards=[FunctionReward("flat", Constant(16))], filter_zero_variance=True,
        max_steps_without_update=3,
    )  # fmt: skip
    trainer = _trainer(100, max_epochs=1, limit_train_batches=6)  # a finite run: without the guard it just ends
    dm = ContextDataModule(LetterDomain(), contexts_per_step=2)
    with pytest.warns(UserWarning, match="took no optimizer step"), pytest.raises(PropelError, match="3 training"):
        trainer.fit(module, datamodule=dm)
    assert trainer.global_step == 0 and module.update_guard.skipped == 3 and module.update_guard.in_a_row == 3
    assert dm.next_index == 3


def test_zero_variance_counter_resets_on_an_update(peaked_model_dir):
    pl.seed_everything(0)
    module = _module(
        peaked_model_dir, rewards=[FunctionReward("flat", Constant(16, flat=lambda step: step % 3 != 2))],
        filter_zero_variance=True, max_steps_without_update=3,
    )  # fmt: skip
    trainer = _trainer(2)
    with pytest.warns(UserWarning, match="every group's rewards were equal"):
        trainer.fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2))
    assert trainer.global_step == 2 and module.update_guard.skipped == 4 and module.update_guard.in_a_row == 0
    assert float(trainer.callback_metrics["train/skipped_steps"]) == 4.0


def test_zero_variance_filter_drops_only_flat_groups(peaked_model_dir, monkeypatch):
    """Inside GRPOModule the filter keeps the groups with reward variance and drops the rest."""
    spy = LossSpy(monkeypatch)
    pl.seed_everything(0)
    words = iter(range(10**6))

    def reward(sample) -> float:
        i = next(words)
        return 1.0 if (i // 8) % 2 == 0 else float(i % 8)  # group 0 flat, group 1 spread

    module = _module(peaked_model_dir, rewards=[FunctionReward("r", reward)], filter_zero_variance=True)
    trainer = _trainer(1, [Record()])
    trainer.fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2))
    assert float(trainer.callback_metrics["train/kept_fraction"]) == 0.5
    rows = sum(c["adv"].shape[0] for c in spy.calls)
    assert rows == 8  # only the spread group reached the loss
    adv = torch.cat([c["adv"] for c in spy.calls])
    want = torch.arange(8.0) - 3.5
    torch.testing.assert_close(adv, want / (want.std() + 1e-4))


def test_dr_grpo_defaults_to_unscaled_advantages(peaked_model_dir, monkeypatch):
    """``loss_type: dr_grpo`` alone gives Dr. GRPO (no std scaling) inside GRPOModule."""
    from propel.lit_modules.grpo import resolve_scale

    assert _module(peaked_model_dir, loss=LossSpec(loss_type="dr_grpo")).scale_rewards == "none"
    assert _module(peaked_model_dir).scale_rewards == "group"
    assert _module(peaked_model_dir, loss=LossSpec(loss_type="dapo"), scale_rewards="batch").scale_rewards == "batch"
    with pytest.warns(UserWarning, match="dr_grpo with scale_rewards='group'"):
        assert resolve_scale("group", "dr_grpo") == "group"
    with pytest.raises(ValueError, match="scale_rewards"):
        resolve_scale("std", "grpo")

    spy = LossSpy(monkeypatch)
    pl.seed_everything(0)
    module = _module(peaked_model_dir, max_new_tokens=2, loss=LossSpec(loss_type="dr_grpo", beta=0.0))
    _trainer(1).fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2))
    rewards = module.rollout_state.rewards.total.view(-1, 8)
    want = (rewards - rewards.mean(dim=1, keepdim=True)).reshape(-1)
    assert want.abs().max() > 0
    torch.testing.assert_close(torch.cat([c["adv"] for c in spy.calls]), want)
    assert all(c["spec"].loss_type == "dr_grpo" and c["spec"].max_completion_length == 2 for c in spy.calls)


def test_importance_correction_weights_foreign_engine_tokens(peaked_model_dir, monkeypatch):
    """With an engine that is not the live policy, each token is weighted by
    ``min(exp(old - engine), cap)``; the HF engine on the policy (or ``importance_correction: false``) gets none."""

    class Foreign(GRPOModule):
        def setup_policy(self):
            super().setup_policy()
            self.engine = ShiftedEngine(self.engine, shift=-math.log(2.0))  # engine logprobs too low by log 2

    def run(cls, **kw):
        spy = LossSpy(monkeypatch)
        pl.seed_everything(0)
        module = _module(peaked_model_dir, cls, max_new_tokens=2, **kw)
        _trainer(1).fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2))
        return spy.calls

    calls = run(Foreign)
    w = torch.cat([c["is_weights"] for c in calls])
    assert (w[w != 1.0] - 2.0).abs().max() < 1e-4 and (w != 1.0).any()  # 1.0 only on padding
    assert all(abs(c["stats"]["is_weight_mean"] - 2.0) < 1e-4 for c in calls)
    capped = run(Foreign, importance_cap=1.5)
    assert all(abs(c["stats"]["is_weight_mean"] - 1.5) < 1e-4 for c in capped)
    assert all(c["is_weights"] is None for c in run(Foreign, importance_correction=False))
    assert all(c["is_weights"] is None for c in run(GRPOModule))  # HF engine on the live policy


def test_first_ppo_ratio_is_one(peaked_model_dir, monkeypatch):
    """Old logprobs and the loss forward both run without dropout, so before any update the PPO
    ratio is exactly 1 (LoRA has no dropout, which could never act: tests/models/test_lora_dropout.py)."""
    spy = LossSpy(monkeypatch)
    pl.seed_everything(0)
    module = _module(peaked_model_dir, lora=LoRASpec(r=8, alpha=16), ppo_epochs=2, micro_batch_size=16)
    _trainer(6).fit(module, datamodule=ContextDataModule(LetterDomain(), contexts_per_step=2))
    first = spy.calls[::2]  # one micro-batch per epoch: calls alternate first / second PPO epoch
    assert len(spy.calls) == 6 and len(first) == 3
    for call in first[1:]:  # after the first update LoRA B is non-zero, so any noise would change the logprobs
        torch.testing.assert_close(call["logp"], call["old"])
        assert call["stats"]["ratio_mean"] == pytest.approx(1.0, abs=1e-6)


def test_stream_and_mining_save_and_fork_the_cuda_rng(monkeypatch):
    """The rollout stream's state holds every CUDA device's RNG (restored at the next step) and
    mining forks the training device's CUDA RNG, so exact resume is not CPU-only. CUDA is faked here: the calls are
    what is checked."""
    import propel.datamodules.stream as stream
    from propel.models.rng import cuda_devices

    states = [torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([3, 4], dtype=torch.uint8)]
    restored: list[tuple[int, list[int]]] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: [s.clone() for s in states])
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, device: restored.append((device, s.tolist())))
    dm = ContextDataModule(LetterDomain(), contexts_per_step=2)
    state = dm.state_dict()
    assert [s.tolist() for s in state["cuda_rng"]] == [[1, 2], [3, 4]]
    resumed = ContextDataModule(LetterDomain(), contexts_per_step=2)
    resumed.load_state_dict(state)
    assert not restored  # restored when the next step starts, not before
    resumed.on_before_rollout(resumed.batch_at(0))
    assert restored == [(0, [1, 2]), (1, [3, 4])]
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    with pytest.warns(UserWarning, match="2 device"):
        stream.set_cuda_rng(states)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert ContextDataModule(LetterDomain()).state_dict()["cuda_rng"] is None  # CPU runs: nothing to save

    assert cuda_devices(torch.device("cpu")) == [] and cuda_devices(torch.device("cuda", 1)) == [1]
