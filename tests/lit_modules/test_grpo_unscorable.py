"""GRPO never scores what its rewards could not judge: on fixed rollouts of the tiny model (single-turn) and on
scripted agent episodes (multi-turn), a sample no paying component judged, or one missing a judgement its group-mates
got, is out of its group's advantages and of the loss (tokens included); a group left with fewer than two is skipped;
both are counted; and with every sample judged the step is what it was, bit for bit."""

from __future__ import annotations

import csv
import logging

import lightning.pytorch as pl
import pytest
import torch
from test_grpo_module import LossSpy

from propel.callbacks.reward_components import RewardComponentMonitor
from propel.datamodules.agent_episodes import EpisodeDataModule
from propel.datamodules.stream import ContextStreamDataModule
from propel.envs.agent_env import AgentEnv, EpisodeState, Observation
from propel.errors import PropelError
from propel.lit_modules.grpo import GRPOModule
from propel.losses.advantages import group_advantages
from propel.losses.policy_gradient import LossSpec
from propel.models.lora import LoRASpec
from propel.records import Context, Prompt, Sample, TaskSource, Turn
from propel.rewards import EnvironmentReward, OverlongPenalty, TRLRewardFunction
from propel.rewards.reward import Reward
from propel.rollouts.steps import Rollout

PROMPTS = ["Word: alpha\n", "Word: river\n", "Word: stone\n"]
G = 4


class _Prompts(TaskSource):
    def __init__(self, n: int) -> None:
        self.n = n

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        return [Context(id=f"p{i}", prompt=Prompt(text=PROMPTS[i]), data={"index": i}) for i in range(self.n)]


class FixedRollouts(ContextStreamDataModule):
    """The first ``n`` prompts, each with the same G recorded completions every step (the engine is not asked)."""

    stop = ()

    def __init__(self, n: int, tokenizer) -> None:
        super().__init__(_Prompts(n), contexts_per_step=n)
        self.tokenizer = tokenizer
        g = torch.Generator().manual_seed(0)
        self.ids = [[torch.randint(200, 5000, (2 + (3 * i + k) % 7,), generator=g).tolist() for k in range(G)]
                    for i in range(len(PROMPTS))]  # fmt: skip

    def rollout(self, engine, batch, sampling) -> Rollout:
        groups = []
        for c in batch.contexts:
            prompt_ids = self.tokenizer(c.prompt.text, add_special_tokens=False)["input_ids"]
            group = []
            for ids in self.ids[c.data["index"]]:
                text = self.tokenizer.decode(ids, skip_special_tokens=True)
                turn = Turn("assistant", text, list(ids), [0.0] * len(ids), True, "length")
                group.append(Sample(c.prompt.text, text, context=c, prompt_ids=prompt_ids, turns=[turn]))
            groups.append(group)
        return Rollout(groups)


def listed(name: str, table: list[list[float | None]]):
    """A TRL reward function paying ``table[prompt][k]`` to the k-th completion of each prompt (None: not judged)."""

    def fn(prompts, completions, index, **kwargs):
        return [table[i][k % G] for k, i in enumerate(index)]

    fn.__name__ = name
    return fn


CONTENT = [[1.0, 0.0, 0.5, 0.25], [0.0, 1.0, 0.75, 0.5], [0.2, 0.4, 0.6, 0.8]]
PENALTY = [[-0.5, 0.0, 0.0, -0.25], [-1.0, 0.0, -0.5, 0.0], [0.0, -0.1, 0.0, -0.3]]


class Gradients(pl.Callback):
    """The LoRA gradients each optimizer step receives, and the step's logged metrics."""

    def __init__(self) -> None:
        self.steps: list[dict[str, torch.Tensor]] = []
        self.metrics: list[dict[str, float]] = []

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.steps.append({n: p.grad.clone() for n, p in pl_module.policy.named_parameters() if "lora_" in n})

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        self.metrics.append({k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")})


def fit(
    model_dir, rewards, n_prompts: int = 3, steps: int = 1, callbacks=(), **overrides
) -> tuple[GRPOModule, Gradients]:
    pl.seed_everything(0)
    module = GRPOModule(
        model=str(model_dir), rewards=rewards, lora=LoRASpec(r=4, alpha=8), group_size=G, max_new_tokens=12,
        micro_batch_size=16, loss=LossSpec(beta=0.04), lr=1e-3, **overrides,
    )  # fmt: skip
    module.configure_model()
    with torch.no_grad():  # B too (peft starts it at 0): the policy is not the reference, the KL has a gradient
        g = torch.Generator().manual_seed(1)
        for name, p in module.policy.named_parameters():
            if "lora_" in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
    rec = Gradients()
    trainer = pl.Trainer(
        max_steps=steps, accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
        enable_checkpointing=False, callbacks=[rec, *callbacks],
    )  # fmt: skip
    trainer.fit(module, datamodule=FixedRollouts(n_prompts, module.tokenizer))
    return module, rec


def trl(name: str, table) -> TRLRewardFunction:
    return TRLRewardFunction(listed(name, table))


def test_with_every_sample_judged_the_step_is_the_plain_one_bit_for_bit(tiny_model_dir, monkeypatch):
    """Every row reaches the loss with the unmasked group advantages of the plain weighted sum, and a component that
    judges nothing at all (a TRL function returning None throughout) changes no bit of the gradient."""
    spy = LossSpy(monkeypatch)
    module, plain = fit(tiny_model_dir, [trl("content", CONTENT), trl("penalty", PENALTY)])
    total = torch.tensor(CONTENT).reshape(-1) + torch.tensor(PENALTY).reshape(-1)
    (call,) = spy.calls
    assert torch.equal(call["adv"], group_advantages(module.rollout_state.rewards.total, G))
    assert torch.equal(module.rollout_state.rewards.total, total)
    lengths = [s.assistant_length for s in module.rollout_state.samples]
    assert call["num_sequences"] == 12 and call["num_tokens"] == sum(lengths)
    assert plain.metrics[0]["train/rewards/unscorable_rate"] == 0.0
    assert plain.metrics[0]["train/rewards/skipped_groups"] == 0
    _, blind = fit(tiny_model_dir, [trl("content", CONTENT), trl("penalty", PENALTY), trl("none", [[None] * G] * 3)])
    assert plain.steps[0].keys() == blind.steps[0].keys()
    assert all(torch.equal(plain.steps[0][k], blind.steps[0][k]) for k in plain.steps[0])
    assert any(float(v.abs().max()) > 0 for v in plain.steps[0].values())  # not vacuous: the step has a gradient


def test_a_group_nothing_judged_is_as_if_it_were_not_in_the_batch(tiny_model_dir):
    """Three prompts where no reward judged the third's completions give the two-prompt step's gradient exactly:
    the skipped group is out of the advantages, the loss and its token count; it is counted."""
    unjudged = [row[:] for row in CONTENT[:2]] + [[None] * G]
    _, three = fit(tiny_model_dir, [trl("content", unjudged), trl("penalty", PENALTY[:2] + [[None] * G])])
    _, two = fit(tiny_model_dir, [trl("content", CONTENT), trl("penalty", PENALTY)], n_prompts=2)
    assert all(torch.equal(three.steps[0][k], two.steps[0][k]) for k in two.steps[0])
    row = three.metrics[0]
    assert row["train/rewards/unscorable_rate"] == pytest.approx(4 / 12) and row["train/rewards/skipped_groups"] == 1
    assert row["train/reward/content/unscored"] == pytest.approx(4 / 12)
    judged_mean = float(torch.tensor(CONTENT[:2]).sum() + torch.tensor(PENALTY[:2]).sum()) / 8
    assert row["train/reward/mean"] == pytest.approx(judged_mean)  # over the judged samples alone


def test_a_sample_that_escapes_a_judgement_its_mates_got_is_out_of_the_loss(
    tiny_model_dir, monkeypatch, caplog, tmp_path
):
    """The cheapest output under a sum over judges: top content and a penalty that cannot judge it (here the
    penalty's function returns None for it; a grader that raised would do the same). It is not compared with the
    penalised mates; a group left with one sample is skipped; a component that raises is logged, once a step; the
    run folder's reward_components.csv holds what W&B gets."""
    spy = LossSpy(monkeypatch)
    penalty = [row[:] for row in PENALTY]
    penalty[1][1] = None  # sample (1, 1): CONTENT 1.0, the group's best, and no penalty verdict
    content = [row[:] for row in CONTENT]
    content[2] = [0.2, None, None, None]  # group 2: one sample judged by content, and the penalty ...
    penalty[2] = [None, None, None, 0.0]  # ... judged a different one: each judge saw one, so no pair compares

    class Broken(Reward):
        name, weight = "broken", 1.0

        def __call__(self, samples):
            raise RuntimeError("grader down")

    with caplog.at_level(logging.WARNING, logger="propel.rewards.combine"):
        module, rec = fit(
            tiny_model_dir,
            [trl("content", content), trl("penalty", penalty), Broken()],
            callbacks=[RewardComponentMonitor(str(tmp_path))],
        )
    assert [r.getMessage().split(",")[0] for r in caplog.records] == ["propel: reward 'broken' raised RuntimeError"]
    (call,) = spy.calls
    samples = module.rollout_state.samples
    kept = [0, 1, 2, 3, 4, 6, 7]  # group 0 whole, group 1 but its escaping sample; group 2 skipped
    assert call["adv"].shape[0] == len(kept)
    assert call["num_sequences"] == len(kept) and call["num_tokens"] == sum(samples[i].assistant_length for i in kept)
    total = module.rollout_state.rewards.total
    want = group_advantages(total[4:8], G, mask=torch.tensor([True, False, True, True]))
    assert torch.equal(call["adv"][4:], want[[0, 2, 3]])
    assert module.rollout_state.scoring.unscorable == 1 + 4 and module.rollout_state.scoring.skipped_groups == 1
    row = rec.metrics[0]
    assert row["train/rewards/unscorable_rate"] == pytest.approx(5 / 12)
    shares = {k: v for k, v in row.items() if k.endswith("/adv_share")}
    assert set(shares) == {f"train/reward/{k}/adv_share" for k in ("content", "penalty", "broken")}
    assert sum(shares.values()) == pytest.approx(1.0) and shares["train/reward/broken/adv_share"] == 0.0
    (written,) = csv.DictReader((tmp_path / "reward_components.csv").open())
    assert float(written["unscorable_rate"]) == pytest.approx(5 / 12) and written["skipped_groups"] == "1"
    for name in ("content", "penalty", "broken"):
        assert float(written[f"share_{name}"]) == pytest.approx(shares[f"train/reward/{name}/adv_share"])


def test_a_step_with_nothing_to_compare_takes_no_update_and_says_why(tiny_model_dir):
    nothing = [[None] * G] * 3
    said = pytest.warns(UserWarning, match="no group had two scorable samples \\(12 of 12 unscorable")
    with said, pytest.raises(PropelError, match="2 training step"):
        fit(tiny_model_dir, [trl("content", nothing)], steps=5, max_steps_without_update=2)


# ------------------------------------------------------------------------------------------------- multi-turn
class VerdictEnv(AgentEnv):
    """One assistant turn, then a verdict: the completion's share of the letter e. A context flagged ``b`` fails at
    reset (an infrastructure failure before any token); one flagged ``n`` ends without a verdict (reward None)."""

    def __init__(self) -> None:
        self._state = EpisodeState()

    @property
    def state(self) -> EpisodeState:
        return self._state

    def reset(self, context, sandbox=None) -> Observation:
        if context.data["flag"] == "b":
            raise OSError("the sandbox went away")
        self.flag, self._state = context.data["flag"], EpisodeState(episode_id=context.id)
        return Observation(role="user", messages=list(context.prompt.messages))

    def step(self, action: str) -> Observation:
        self._state.step_count += 1
        self._state.done, self._state.finish_reason = True, "submitted"
        verdict = None if self.flag == "n" else action.count("e") / max(1, len(action))
        return Observation(done=True, reward=verdict, finish_reason="submitted")


class FlaggedTasks(TaskSource):
    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        flags = ["ok", "b", "n"]
        chat = [Prompt(messages=[{"role": "user", "content": f"Say a word about {f}."}]) for f in flags]
        return [Context(f"t{seed}-{i}", chat[i], data={"flag": flags[i]}) for i in range(n)]


def test_agent_episodes_without_a_verdict_or_lost_to_the_infrastructure_are_counted_and_left_out(
    tiny_model_dir, monkeypatch
):
    spy = LossSpy(monkeypatch)
    pl.seed_everything(0)
    module = GRPOModule(
        model=str(tiny_model_dir), lora=LoRASpec(r=4, alpha=8), group_size=2, max_new_tokens=6, lr=1e-2,
        rewards=[EnvironmentReward(), OverlongPenalty(max_length=4, cache=4, weight=0.0)],  # the second only logs
    )  # fmt: skip
    rec = Gradients()
    trainer = pl.Trainer(
        max_steps=1, accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False,
        enable_checkpointing=False, callbacks=[rec],
    )  # fmt: skip
    data = EpisodeDataModule(VerdictEnv, FlaggedTasks(), contexts_per_step=3, execute_cut_turns=True)
    trainer.fit(module, datamodule=data)
    samples, breakdown = module.rollout_state.samples, module.rollout_state.rewards
    flags = [s.context.data["flag"] for s in samples]
    assert flags == ["ok", "ok", "b", "b", "n", "n"] and all(s.infra_error for s in samples[2:4])
    env = breakdown.components["env"]
    assert torch.isfinite(env[:2]).all() and torch.isnan(env[2:]).all()  # no verdict is not a verdict of 0
    assert torch.isfinite(breakdown.components["overlong"]).all() and torch.isnan(breakdown.total[2:]).all()
    row = rec.metrics[0]
    assert row["train/rewards/unscorable_rate"] == pytest.approx(4 / 6) and row["train/rewards/skipped_groups"] == 2
    assert sum(c["adv"].shape[0] for c in spy.calls) == 2  # the ok group's two episodes alone reach the loss
    assert spy.calls[0]["num_tokens"] == sum(s.assistant_length for s in samples[:2])
