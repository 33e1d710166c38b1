"""Extending propel by adding files only: a reward that grades against the context's gold data, and a new trainer
on the shared LoRA policy base. Both live in this test file and nothing in the package knows about them."""

from __future__ import annotations

import lightning.pytorch as pl
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from propel.callbacks.samples import SampleTable
from propel.datamodules.contexts import ContextDataModule
from propel.domains.interface import Domain, ParseFailure, Verdict
from propel.lit_modules.grpo import GRPOModule
from propel.lit_modules.lora_policy import LoRAPolicyModule
from propel.lit_modules.state import RolloutState
from propel.models.lora import LoRASpec
from propel.records import Context, Prompt, Sample, Task, Turn
from propel.rewards import Reward, RewardContext
from propel.rollouts import ContextBatch, pack

ANSWERS = ["red", "blue", "green", "black"]


class QuizDomain(Domain):
    """Contexts carry their gold answer in ``data`` (as a triage ticket carries its gold articles)."""

    name, needs_sandbox = "quiz", False

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        out = []
        for i in range(n):
            answer = ANSWERS[(seed + i) % len(ANSWERS)]
            prompt = Prompt(text=f"Colour {answer[0]}:")
            out.append(Context(id=f"quiz-{seed}-{i}", prompt=prompt, group=answer, data={"answer": answer}))
        return out

    def parse(self, completion: str):
        return Task(self.name, {"text": completion.strip()}) if completion.strip() else ParseFailure("blank")

    def validity(self, tasks, sandbox=None) -> list[Verdict]:
        return [Verdict(True, "ok") for _ in tasks]

    def solver_prompt(self, task) -> Prompt:
        return Prompt(text=task.data["text"])

    def grade(self, task, completions, sandbox=None) -> list[bool]:
        return [True for _ in completions]

    def topic(self, task) -> str:
        return task.data["text"][:1]


class SharesGoldLetters(Reward):
    """Share of the gold answer's letters in the completion: needs ``sample.context.data``, and records its setup."""

    name = "gold"

    def __init__(self) -> None:
        self.context: RewardContext | None = None

    def setup(self, context: RewardContext) -> None:
        self.context = context

    def __call__(self, samples) -> torch.Tensor:
        return torch.tensor([score(s) for s in samples])


def score(sample: Sample) -> float:
    gold = set(sample.context.data["answer"])
    return sum(c in gold for c in sample.completion) / max(1, len(sample.completion))


def _trainer(steps: int, callbacks=()) -> pl.Trainer:
    return pl.Trainer(
        max_steps=steps,
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=any(isinstance(c, ModelCheckpoint) for c in callbacks),
        callbacks=list(callbacks),
    )


def test_a_reward_reads_gold_data_from_the_context(tiny_model_dir):
    pl.seed_everything(0)
    reward = SharesGoldLetters()
    module = GRPOModule(model=str(tiny_model_dir), rewards=[reward], lora=LoRASpec(r=4, alpha=8), group_size=4)
    module.hparams.max_new_tokens = module.sampling.max_new_tokens = 4
    data = ContextDataModule(QuizDomain(), contexts_per_step=2)
    _trainer(2).fit(module, datamodule=data)
    assert reward.context is not None and reward.context.policy is module.policy  # setup(context) ran once
    state = module.rollout_state
    assert state.step == 1 and len(state.samples) == 8
    assert [s.context.id for s in state.samples] == [f"quiz-1-{i}" for i in (0, 1) for _ in range(4)]
    want = torch.tensor([score(s) for s in state.samples])
    assert torch.equal(state.rewards.components["gold"], want)


class GoldSFT(LoRAPolicyModule):
    """A new trainer in a few lines: teacher-forced likelihood of each context's gold answer, on the shared base
    (model, LoRA, optimizer, micro-batches, span logprobs, LoRA-only checkpoints all come from LoRAPolicyModule)."""

    def training_step(self, batch: ContextBatch, batch_idx: int) -> None:
        self.rollout_source.on_before_rollout(batch)
        samples = []
        for ctx in batch.contexts:
            answer = " " + ctx.data["answer"]
            ids = self.tokenizer(answer, add_special_tokens=False)["input_ids"]
            prompt_ids = self.engine.encode_prompt(ctx.prompt)
            turn = Turn("assistant", answer, ids)
            samples.append(Sample(ctx.prompt.text, answer, context=ctx, prompt_ids=prompt_ids, turns=[turn]))
        packed = pack(samples, torch.zeros(len(samples)), self.tokenizer.pad_token_id)
        n_tok = float(packed.loss_mask.sum())

        def micro_loss(rows):
            sub = packed.select(rows)
            logp, _ = self.sequence_logprobs(sub)
            return -(logp * sub.loss_mask.to(self.device)).sum() / n_tok, {}

        stats = self.optimization_step(len(samples), micro_loss)
        self.rollout_state = RolloutState(step=self.global_step, samples=samples)
        self.log("train/nll", stats["loss"], on_step=True, batch_size=len(samples))
        self.losses.append(stats["loss"])


def test_a_new_trainer_shares_the_policy_base(tiny_model_dir, tmp_path):
    pl.seed_everything(0)
    module = GoldSFT(model=str(tiny_model_dir), lora=LoRASpec(r=8, alpha=32), lr=0.1, micro_batch_size=2)
    module.losses = []
    checkpoint = ModelCheckpoint(dirpath=tmp_path, save_last=True)
    _trainer(12, [checkpoint, SampleTable(every_n_steps=1)]).fit(
        module, datamodule=ContextDataModule(QuizDomain(), contexts_per_step=4)
    )
    assert len(module.losses) == 12 and module.global_step == 12
    assert sum(module.losses[:3]) - sum(module.losses[-3:]) > 0.9, module.losses  # NLL of the gold answers fell
    ckpt = torch.load(tmp_path / "last.ckpt", weights_only=False)
    assert ckpt["state_dict"] and all("lora_" in k for k in ckpt["state_dict"])
    assert module.rollout_state.samples[0].context.data["answer"] in ANSWERS
