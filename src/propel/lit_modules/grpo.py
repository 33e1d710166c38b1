"""GRPO on a LoRA policy: sample G completions per context, score them, and take PPO-style optimizer steps.

One training step = one batch of contexts = rollouts + ``ppo_epochs`` optimizer steps over them (so
``global_step`` counts optimizer steps). Everything about the policy (model, LoRA, engine sync, micro-batches, span
logprobs, LoRA-only checkpoints) is ``LoRAPolicyModule``'s; this file holds what is GRPO: group advantages, the
clipped policy loss with its KL anchor to the adapter-free reference, and the importance correction for engines
that are not the live policy.

Asynchronous rollouts (``async_rollouts: true``): a rollout may come from weights up to ``max_staleness`` optimizer
steps old. The importance weights then compare the current policy (the "old" logprobs of the clipped loss are
computed now, by the trainer) with the engine's sampling logprobs, so one truncated correction covers both the
engine mismatch and the staleness (decoupled PPO: behaviour policy = the engine, proximal policy = the weights now).
The staleness of each step is logged (``train/staleness``) and published on ``rollout_state.policy_version``.

Data-parallel (``trainer.strategy: ddp``): each rank rolls out its share of the step's contexts (whole groups, see
``ContextStreamDataModule``) and computes their advantages; the loss is normalised by the sequence and token counts
of the global batch and multiplied by the world size, so that DDP's gradient average is the gradient one process
would compute on the whole batch. Whether the step updates at all is decided on the global kept count, and a rank
whose groups were all filtered out (or whose rollouts all failed) still takes part in the gradient all-reduce, with
a zero-weighted placeholder row. ``scale_rewards: batch`` divides by the standard deviation of the gathered global
batch. A step whose rollouts failed on every rank fails every rank with the same message. Reward statistics are
computed on the gathered global batch, the rest are reduced as global means (``sync_dist``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import NamedTuple

import torch
from lightning.pytorch.utilities import rank_zero_warn

from propel.errors import ConfigError
from propel.lit_modules.lora_policy import LoRAPolicyModule
from propel.lit_modules.loss_terms import LossTerm
from propel.lit_modules.state import RolloutState, StepScoring
from propel.losses.advantage_shares import advantage_shares
from propel.losses.advantages import SCALES, group_advantages, within_valid_share, zero_variance_mask
from propel.losses.policy_gradient import LossSpec, policy_loss, truncated_importance_weights
from propel.losses.scorable import learnable
from propel.rewards.combine import CombinedReward, RewardBreakdown
from propel.rewards.reward import RewardComponent, RewardContext
from propel.rollouts.episode_stats import episode_stats
from propel.rollouts.packing import PackedBatch, pack
from propel.rollouts.steps import ContextBatch, Rollout


def resolve_scale(scale_rewards: str | None, loss_type: str) -> str:
    """The advantage scaling for a loss type: None picks ``none`` for ``dr_grpo`` and ``group`` otherwise; an
    explicit std scaling with ``dr_grpo`` is kept, with a warning (it brings back the bias Dr. GRPO removes)."""
    if scale_rewards is None:
        return "none" if loss_type == "dr_grpo" else "group"
    if scale_rewards not in SCALES:
        raise ConfigError(f"scale_rewards must be one of {SCALES} or null, got {scale_rewards!r}")
    if loss_type == "dr_grpo" and scale_rewards != "none":
        rank_zero_warn(
            f"loss_type dr_grpo with scale_rewards={scale_rewards!r} still divides advantages by a reward std "
            "(Dr. GRPO uses none); leave scale_rewards unset for the Dr. GRPO default"
        )
    return scale_rewards


class StepConstants(NamedTuple):
    """What every micro-batch of a GRPO step shares (``PolicyGradientLoss.prepare``)."""

    spec: LossSpec
    share: float
    """Multiplies the loss and statistics: the world size (DDP's gradient mean is the global batch's), 0 on a rank
    that only joins the all-reduce."""
    old_logp: torch.Tensor | None
    ref_logp: torch.Tensor | None
    is_weights: torch.Tensor | None
    num_sequences: int
    num_tokens: float
    sequence_tokens: torch.Tensor


class PolicyGradientLoss:
    """GRPO's clipped policy loss as a loss term (``propel.lit_modules.loss_terms.LossTerm``): its rows are the step's
    packed samples with their advantages; ``prepare`` computes what every micro-batch shares (the old and reference
    logprobs, the importance weights, the global sequence and token counts), ``loss`` the micro-batch's share of
    ``propel.losses.policy_gradient.policy_loss``."""

    def __init__(self, module: GRPOModule) -> None:
        self.module = module
        self.batch: PackedBatch | None = None
        """This step's packed rows (None between steps and on a step without an update)."""
        self.constants: StepConstants | None = None

    def collect(self, rollout: Rollout) -> dict[str, float]:
        return {}  # the rows exist only once the rollouts are scored (``prepare``)

    def prepare(self, batch: PackedBatch, share: float) -> None:
        """The step's rows, and what their micro-batches share. ``share`` multiplies the loss and the statistics (the
        world size, so that DDP's gradient mean is the global batch's; 0 on a rank that only joins the all-reduce);
        both are normalised by the global sequence and token counts."""
        module, hp, spec = self.module, self.module.hparams, self.module.loss_spec
        if spec.max_completion_length is None:
            spec = LossSpec(**{**spec.__dict__, "max_completion_length": hp.max_new_tokens})
        # An engine sampling from the live policy itself (HF generate) needs no importance correction, and with one
        # PPO iteration the old policy is the current one: skip that forward pass (as TRL does).
        correct = hp.importance_correction and not module.engine_is_policy()
        old_logp = module.frozen_logprobs(batch, reference=False) if (hp.ppo_epochs > 1 or correct) else None
        ref_logp = module.frozen_logprobs(batch, reference=True) if spec.beta > 0 else None
        is_w = None
        if correct:
            is_w = truncated_importance_weights(
                old_logp, batch.engine_logp, cap=hp.importance_cap, mask=batch.loss_mask
            )
        self.batch = batch
        self.constants = StepConstants(
            spec=spec,
            share=share,
            old_logp=old_logp,
            ref_logp=ref_logp,
            is_weights=is_w,
            # an episode is one sequence however many step-wise segments (rows) it has: counted and averaged once
            num_sequences=int(module.ranks.sum(batch.num_episodes if share else 0)),
            num_tokens=max(module.ranks.sum(float(batch.loss_mask.sum()) if share else 0.0), 1.0),
            sequence_tokens=batch.episode_tokens(),
        )

    def rows(self) -> int:
        return 0 if self.batch is None else self.batch.input_ids.shape[0]

    def active(self) -> bool:
        return self.batch is not None

    def loss(self, rows: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        module, c = self.module, self.constants
        share, n_tok = c.share, c.num_tokens
        sub = self.batch.select(rows)
        mask = sub.loss_mask.to(module.device)
        logp, entropy = module.sequence_logprobs(sub, with_entropy=True)
        out = policy_loss(
            logp,
            c.old_logp[rows].to(module.device) if c.old_logp is not None else logp.detach(),
            sub.advantages.to(module.device),
            mask,
            c.spec,
            ref_logp=c.ref_logp[rows].to(module.device) if c.ref_logp is not None else None,
            is_weights=c.is_weights[rows].to(module.device) if c.is_weights is not None else None,
            num_sequences=c.num_sequences,
            num_tokens=n_tok,
            sequence_tokens=c.sequence_tokens[rows],
        )
        weight = share * float(mask.sum()) / n_tok  # token-weighted average of micro-batch statistics
        stats = {name: weight * value for name, value in out.stats.items()}
        stats["entropy"] = share * float((entropy * mask).sum()) / n_tok
        return share * out.loss, stats

    def after_step(self, totals: dict[str, float]) -> dict[str, float]:
        return totals

    def release(self) -> None:
        """Drop the step's rows and logprobs once its updates are done (they are not kept into the next rollout)."""
        self.batch, self.constants = None, None


class GRPOModule(LoRAPolicyModule):
    """Group Relative Policy Optimization for a LoRA-adapted causal LM.

    Args:
        rewards: reward components (name, weight, ``setup(context)``, ``__call__(samples)``), summed with weights.
        loss: loss type and clipping / KL settings (``grpo``, beta 0.04, k3 by default).
        group_size: completions per context (G).
        scale_rewards: advantage scaling: ``group`` (GRPO), ``batch`` or ``none`` (Dr. GRPO); None (default) takes
            ``none`` for ``loss.loss_type: dr_grpo`` (Dr. GRPO removes both the length and the std normalisation)
            and ``group`` otherwise.
        filter_zero_variance: drop groups whose rewards are all equal (no policy gradient in them); a step where
            every group is dropped takes no optimizer step (see ``max_steps_without_update``).
        zero_variance_tol: reward std below which a group counts as zero-variance.
        ppo_epochs: optimizer steps over each batch of rollouts (PPO inner iterations, >= 1).
        importance_correction: reweight tokens by ``min(exp(trainer_old_logp - engine_logp), cap)`` when the engine
            is not the live policy itself (vLLM; with ``async_rollouts`` it also covers the staleness); the HF engine
            samples from the policy, so it is skipped there.
        importance_cap: the truncation ``cap`` above.
        **kwargs: the policy's settings (``LoRAPolicyModule``: model, lora, sampling, optimizer, engine, ...);
            ``max_new_tokens`` is also the ``dr_grpo`` constant unless the loss sets one.
    """

    supports_async_rollouts = True  # the truncated importance weights correct for stale rollouts

    def __init__(
        self,
        rewards: Sequence[RewardComponent] = (),
        loss: LossSpec | None = None,
        group_size: int = 8,
        scale_rewards: str | None = None,
        filter_zero_variance: bool = False,
        zero_variance_tol: float = 1e-6,
        ppo_epochs: int = 1,
        importance_correction: bool = True,
        importance_cap: float = 3.0,
        **kwargs,
    ) -> None:
        if group_size < 2:
            raise ConfigError(f"group_size must be >= 2 (advantages are relative within a group), got {group_size}")
        if ppo_epochs < 1:
            raise ConfigError(f"ppo_epochs must be >= 1, got {ppo_epochs}")
        super().__init__(**kwargs)
        if self.hparams.async_rollouts and not importance_correction:
            raise ConfigError(
                "async_rollouts samples with weights up to max_staleness steps old: keep importance_correction on"
            )
        self.reward = CombinedReward(list(rewards)) if rewards else None
        self.loss_spec = loss or LossSpec()
        self.scale_rewards = resolve_scale(scale_rewards, self.loss_spec.loss_type)
        self.sampling.n = group_size
        self.policy_gradient = PolicyGradientLoss(self)
        self.loss_terms: list[LossTerm] = []
        """Loss terms beside GRPO's clipped loss in every optimizer step (a subclass appends them)."""

    @property
    def terms(self) -> list[LossTerm]:
        """The step's loss, term by term: the added terms, then GRPO's clipped loss (an added term may swap weights
        in place, the EMA teacher: it computes before the policy loss's graph exists)."""
        return [*self.loss_terms, self.policy_gradient]

    def optimizer_steps_per_batch(self) -> int:
        return self.hparams.ppo_epochs

    def setup_policy(self) -> None:
        if self.reward is not None:  # e.g. a probe reward reading the policy with adapters off as its reference
            self.reward.setup(RewardContext(self.policy, self.tokenizer, self.hparams.model))

    # ---------------------------------------------------------------------------------------------- step
    def training_step(self, batch: ContextBatch, batch_idx: int) -> None:
        """Rollout, rewards, advantages, the loss terms, one update (``ppo_epochs`` of them)."""
        if self.reward is None:
            raise ValueError("GRPOModule needs at least one reward component: pass rewards=[...]")
        g = self.hparams.group_size
        rollout = self.collect_rollout(batch)
        samples = rollout.samples
        named = {k: v for term in self.terms for k, v in term.collect(rollout).items()}
        failed = torch.tensor([s.infra_error is not None for s in samples])
        self._fail_if_all_failed(samples, failed)
        breakdown, everywhere = self._rewards(samples)
        # What no reward could judge, and infrastructure failures (not the policy's doing), are out of the group
        # statistics and the loss, never scored 0; so is a group left with fewer than two samples to compare.
        scorable = ~failed & breakdown.judged(g)
        keep, skipped = learnable(scorable, g)
        scoring = self._scoring(everywhere, scorable, keep, skipped)
        self.rollout_state = RolloutState(
            step=self.global_step, samples=samples, rewards=breakdown, policy_version=self.rollout_version,
            scoring=scoring,
        )  # fmt: skip
        advantages = self._advantages(breakdown.total, everywhere.total, keep)
        judged = keep.clone()
        if self.hparams.filter_zero_variance:
            keep &= ~zero_variance_mask(breakdown.total, g, tol=self.hparams.zero_variance_tol, mask=keep)
        stats = self._step_stats(rollout, everywhere, scoring, keep, judged)
        log = {"on_step": True, "batch_size": len(samples), "sync_dist": self.ranks.size > 1}
        if not self.ranks.sum(keep.sum()):  # nothing to learn from this batch: no GRPO update (counted)
            self._no_grpo_update(breakdown, scoring)
            self.log_dict({f"train/{k}": v for k, v in stats.items()}, **log)
            if any(term.active() for term in self.loss_terms):  # the other loss terms still take their update
                named.update(self.step_on_terms(self.loss_terms))
                self.log("train/loss", named.pop("loss"), prog_bar=True, **{**log, "batch_size": 1})
            self.log_dict({f"train/{k}": v for k, v in named.items()}, **{**log, "batch_size": 1})
            return
        # A rank with nothing kept while others have rows still joins the all-reduce: a placeholder row, weighted zero.
        if keep.any():
            rows = torch.nonzero(keep).squeeze(-1)
            packed = pack([samples[i] for i in rows.tolist()], advantages[rows], self.tokenizer.pad_token_id)
        else:
            packed = pack([self.placeholder_sample()], torch.zeros(1), self.tokenizer.pad_token_id)
        start = time.perf_counter()
        self.policy_gradient.prepare(packed, float(self.ranks.size) if keep.any() else 0.0)
        stats.update(self._update())
        stats["time/training_s"] = time.perf_counter() - start
        self.log("train/loss", stats.pop("loss"), prog_bar=True, **log)
        self.log_dict({f"train/{k}": v for k, v in stats.items()}, **log)
        self.log_dict({f"train/{k}": v for k, v in named.items()}, **{**log, "batch_size": 1})

    def _rewards(self, samples: list) -> tuple[RewardBreakdown, RewardBreakdown]:
        """This rank's reward breakdown, and the global batch's (every rank's, gathered; this rank's alone in one
        process). The policy is in eval mode: a probe reading it as its reference must see no dropout."""
        with self.eval_mode():
            breakdown = self.reward(samples)
        everywhere = RewardBreakdown(
            total=self.ranks.gather(breakdown.total),
            components={k: self.ranks.gather(v) for k, v in breakdown.components.items()},
            extras=breakdown.extras,
            logged={k: self.ranks.gather(v) for k, v in breakdown.logged.items()},
            weights=breakdown.weights,
            errors=breakdown.errors,
        )
        return breakdown, everywhere

    def _step_stats(
        self, rollout: Rollout, everywhere: RewardBreakdown, scoring: StepScoring, keep: torch.Tensor, judged
    ) -> dict[str, float]:
        """What a step logs before its update: rewards, scoring, validity, lengths, throughput, the kept share."""
        samples = rollout.samples
        lengths = torch.tensor([s.assistant_length for s in samples], dtype=torch.float32)
        stats = {
            **everywhere.stats("reward"),
            **scoring.stats(),
            "valid_rate": sum(s.valid for s in samples) / len(samples),
            "completion_length": float(lengths.mean()),
            "tokens_per_s": float(lengths.sum()) / max(rollout.timings.get("generation_s", 0.0), 1e-9),
            "kept_fraction": float(keep.float().mean()),
            **self._within_valid_share(everywhere.total, samples, self.hparams.group_size, judged),
            **episode_stats(samples),
            **{f"time/{k}": v for k, v in rollout.timings.items()},
        }
        if self.hparams.async_rollouts:
            stats["staleness"] = float(self.global_step - self.rollout_version)
            stats["time/rollout_wait_s"] = self.rollout_wait_s
        return stats

    def _no_grpo_update(self, breakdown: RewardBreakdown, scoring: StepScoring) -> None:
        """Count a step without a GRPO update, with why: no group had two scorable samples, or every group's rewards
        were equal."""
        if scoring.skipped_groups == scoring.groups:
            raised = "; ".join(f"reward {k!r} raised {v}" for k, v in breakdown.errors.items())
            self.no_update(
                f"no group had two scorable samples ({scoring.unscorable} of {scoring.samples} unscorable"
                + (f"; {raised}" if raised else "")
                + ")",
                "see train/rewards/unscorable_rate and each train/reward/<name>/unscored",
            )
        else:
            self.no_update(
                "every group's rewards were equal (filter_zero_variance)",
                "the task is too easy or too hard for the policy, or the reward is constant",
            )

    def _fail_if_all_failed(self, samples: list, failed: torch.Tensor) -> None:
        """Stop when every rollout of the step failed outside the policy, on every rank: the decision and the message
        (rank 0's first error) are the same everywhere, so no rank waits in a collective for one that raised. A rank
        whose share alone failed goes on (it joins the step with a placeholder row), as one process would."""
        if self.ranks.sum(float((~failed).sum())):
            return
        first = samples[0].infra_error if samples else None
        if self.ranks.size > 1:
            first = self.trainer.strategy.broadcast(first, src=0)
        where = f" on all {self.ranks.size} ranks" if self.ranks.size > 1 else ""
        raise RuntimeError(f"every rollout of step {self.global_step} failed outside the policy{where}; first: {first}")

    def _within_valid_share(
        self, everywhere: torch.Tensor, samples: list, group_size: int, keep: torch.Tensor
    ) -> dict[str, float]:
        """``adv_share_within_valid`` of the global batch (``propel.losses.advantages.within_valid_share``) over the
        samples in the advantages (``keep``), so every rank logs the same key and value (a key logged on one rank
        only breaks the all-reduce); absent, on every rank, when no group has reward variance."""
        valid = self.ranks.gather(torch.tensor([float(bool(s.valid)) for s in samples]))
        kept = self.ranks.gather(keep.float()).bool()
        share = within_valid_share(everywhere, valid.bool(), group_size, kept)
        return {} if share is None else {"adv_share_within_valid": share}

    def _scoring(
        self, everywhere: RewardBreakdown, scorable: torch.Tensor, keep: torch.Tensor, skipped: torch.Tensor
    ) -> StepScoring:
        """The global batch's unscorable samples (not ``scorable``) and skipped groups, and each paying component's
        share of the advantage variance over the samples in the advantages (``keep``); this rank's masks in, the
        same figures out on every rank."""
        judged = self.ranks.gather(scorable.float()).bool()
        kept = self.ranks.gather(keep.float()).bool()
        skipped = self.ranks.gather(skipped.float()).bool()
        weights = everywhere.weights
        paying = [k for k in everywhere.components if weights.get(k, 1.0) != 0] or list(everywhere.components)
        shares = None
        if paying:
            parts = torch.stack([weights.get(k, 1.0) * everywhere.components[k].float() for k in paying], dim=1)
            shares = advantage_shares(parts, self.hparams.group_size, kept, self.scale_rewards)
        return StepScoring(
            samples=int(kept.numel()),
            unscorable=int((~judged).sum()),
            groups=int(skipped.numel()),
            skipped_groups=int(skipped.sum()),
            shares={} if shares is None else {k: float(v) for k, v in zip(paying, shares, strict=True)},
            errors=dict(everywhere.errors),
        )

    def _advantages(self, rewards: torch.Tensor, everywhere: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """This rank's group advantages over the ``keep`` samples. ``group`` and ``none`` need only each group's
        rewards; ``batch`` divides by the standard deviation of the global batch (``everywhere``: every rank's
        rewards, gathered in rank order), so it is computed there and this rank's slice taken."""
        g = self.hparams.group_size
        if self.scale_rewards != "batch" or self.ranks.size == 1:
            return group_advantages(rewards, g, scale=self.scale_rewards, mask=keep)
        kept = self.ranks.gather(keep.float()).bool()
        n, rank = rewards.numel(), self.global_rank
        return group_advantages(everywhere, g, scale="batch", mask=kept)[rank * n : (rank + 1) * n]

    def _update(self) -> dict[str, float]:
        """``ppo_epochs`` optimizer steps on the step's terms (``step_on_terms``). Returns each statistic's global
        value on every rank after a rank mean."""
        totals: dict[str, float] = {}
        try:
            for _ in range(self.hparams.ppo_epochs):
                totals = self.step_on_terms(self.terms)
        finally:
            self.policy_gradient.release()
        if not all(math.isfinite(v) for v in totals.values()):
            raise FloatingPointError(f"non-finite GRPO statistics: {totals}")
        return totals
