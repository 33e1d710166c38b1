"""A step-wise episode under ``loss_type`` grpo and dr_grpo: an episode is one sequence however
many training rows (segments) it was packed into, so its weight in the loss is one episode's. The check: the same
episode packed as two segments or as one row (whose second turn sees exactly the second segment's prefix) gives
the same loss and the same update."""

from __future__ import annotations

import copy

import lightning.pytorch as pl
import pytest
import torch

from propel.datamodules.contexts import ContextDataModule
from propel.domains.math import MathExpressionDomain
from propel.lit_modules.grpo import GRPOModule
from propel.losses.policy_gradient import LossSpec
from propel.models.lora import LoRASpec
from propel.records import Sample, Turn
from propel.rewards import FunctionReward
from propel.rollouts import Rollout


class FixedEpisodes(GRPOModule):
    """GRPO on one hand-made group of episodes (``episodes``) instead of sampled ones."""

    episodes: list[Sample] = []

    def collect_rollout(self, batch):
        self.rollout_version, self.rollout_wait_s = self.global_step, 0.0
        return Rollout([copy.deepcopy(self.episodes)])


def _episodes(tokenizer, stepwise: bool) -> list[Sample]:
    def ids(text):
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    def said(text):
        return Turn("assistant", text, ids(text), None, True, "stop")

    prompt, a1, obs, a2 = ids("Name three colours."), said(" red green"), ids(" ok then"), said(" blue and more")
    if stepwise:  # the observation closes segment 1 (text only) and opens segment 2's prompt
        first = Sample("", "", prompt_ids=prompt, turns=[a1, Turn("tool", " ok then", [], None, False, "")])
        split = Sample("", "", prompt_ids=prompt + a1.token_ids + obs, turns=[a2], segments=[first])
    else:
        split = Sample("", "", prompt_ids=prompt, turns=[a1, Turn("tool", " ok then", obs, None, False, ""), a2])
    others = [Sample("", "", prompt_ids=prompt, turns=[said(text)]) for text in (" yellow", " purple pink orange")]
    for sample, reward in zip([split, *others], (1.0, 0.0, 0.5), strict=True):
        sample.info["r"] = reward
    return [split, *others]


def _step(model_dir, tokenizer, loss_type: str, stepwise: bool):
    pl.seed_everything(0)
    module = FixedEpisodes(
        model=str(model_dir),
        rewards=[FunctionReward("r", lambda s: s.info["r"])],
        lora=LoRASpec(r=4, alpha=8),
        group_size=3,
        micro_batch_size=2,
        loss=LossSpec(loss_type, beta=0.0),
        optimizer=lambda params: torch.optim.SGD(params, lr=1.0),
        gradient_clip_val=0.0,
    )
    module.episodes = _episodes(tokenizer, stepwise)
    trainer = pl.Trainer(max_steps=1, accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False)  # fmt: skip
    trainer.fit(module, datamodule=ContextDataModule(MathExpressionDomain(), contexts_per_step=1))
    lora = {k: v.detach().clone() for k, v in module.policy.named_parameters() if "lora_B" in k}
    return float(trainer.callback_metrics["train/loss"]), lora


@pytest.mark.parametrize("loss_type", ["grpo", "dr_grpo"])
def test_a_step_wise_episode_weighs_one_episode(tiny_model_dir, tokenizer, loss_type):
    assert len(_episodes(tokenizer, True)[0].segments) == 1  # two training rows for the first episode
    split_loss, split = _step(tiny_model_dir, tokenizer, loss_type, stepwise=True)
    whole_loss, whole = _step(tiny_model_dir, tokenizer, loss_type, stepwise=False)
    assert split_loss == pytest.approx(whole_loss, rel=1e-5, abs=1e-7)  # grpo: 0 at ratio 1 (mean advantage 0)
    scale = max(float(v.abs().max()) for v in whole.values())
    assert scale > 1e-4  # the update moved the adapter
    # The two packings share prompts differently (``share_prompt``: rows with one prompt run it once), so they agree
    # to float rounding (measured 1e-6 at weights of 0.2), not bit for bit; a wrong episode weight moves them ~scale/2.
    for k, v in whole.items():
        torch.testing.assert_close(split[k], v, rtol=1e-4, atol=1e-4 * scale, msg=k)
