"""GRPOModule + ContextDataModule on a tiny random model: learning signal, LoRA-only checkpoints, exact resume."""

from __future__ import annotations

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from propel.datamodules.contexts import ContextDataModule
from propel.domains.base import Context, Domain, ParseFailure, Task, Verdict
from propel.engines.base import Prompt
from propel.lit_modules.grpo import GRPOModule
from propel.losses.policy import LossSpec
from propel.models.lora import LoRASpec
from propel.rewards import FunctionReward
from propel.rollouts import Sample

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


@pytest.fixture(scope="module")
def peaked_model_dir(tmp_path_factory, tokenizer):
    """A tiny random Llama whose (tied) embeddings are scaled x8: a peaked, learnable next-token distribution."""
    from propel.models.tiny import tiny_causal_lm

    model = tiny_causal_lm(tokenizer)
    with torch.no_grad():
        model.get_input_embeddings().weight.mul_(8.0)
    out = tmp_path_factory.mktemp("peaked") / "model"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _module(model_dir, **overrides) -> GRPOModule:
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
    return GRPOModule(**kwargs)


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
