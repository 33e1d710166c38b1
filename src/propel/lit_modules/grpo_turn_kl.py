"""GRPO with a turn-targeted KL term: the verifiable reward's policy gradient and, on the turns a hint source names,
the pull toward the policy-with-a-hint, in one optimizer step (reward, then targeted alignment, then one
clipped policy update).

Each step's episodes are scored and turned into GRPO's clipped loss as ``GRPOModule`` does; the same episodes are handed
to the hint source, and its targets add ``kl_coefficient`` times the turn-t divergence over the step's divisor
(``TurnKLTerm``; with ``anchor_weight`` also the anchor on the targeted episodes' other turns) to the loss. The term is
one more loss term of GRPO's step (``TurnKLLoss``, a ``LossTerm``, listed before GRPO's clipped loss): the step's terms
are summed in one place (``propel.lit_modules.loss_terms.summed_loss``); the micro-batches run over the targets first
and GRPO's rows after, so the gradients of both terms are summed before the one clipped update. Every term is logged on
its own (``train/clipped_ratio``, ``train/kl`` ... for GRPO, ``train/distill/loss``, ``train/distill/divergence``,
``train/distill/control_divergence`` for the turn term). The turn's tokens are the rollout's own samples, so the term is
on-policy by construction; with an engine that is not the policy (vLLM) each token is weighted by the truncated
importance ratio policy/engine. A step where GRPO takes no update (every group filtered for zero variance) still takes
the turn term's. The EMA teacher is updated after every optimizer step, including steps without targets.

Data-parallel: whether there are targets is decided on the global count and the turn term is normalised by the
global target token count times the world size (``TurnKLTerm``); a rank without targets, or without any row at all,
still joins each optimizer step (GRPO's placeholder row, or ``optimization_step``'s zero-weighted forward).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from propel.lit_modules.grpo import GRPOModule
from propel.lit_modules.turn_kl import AnchorRow, TurnKLSpec, TurnKLTerm, turn_engine_logprobs
from propel.losses.turn_normalisation import TurnNorm
from propel.rollouts.hints import HintSource, TurnTarget
from propel.rollouts.steps import Rollout


class TurnKLLoss:
    """The turn-targeted KL term as one more loss source of a GRPO step (``propel.lit_modules.loss_terms.LossTerm``):
    targets named on the step's own rollouts (and the anchor's rows on their other turns), the term's loss over the
    step's divisor (``TurnKLSpec.normalisation``), the EMA teacher's update after every optimizer step. The term's
    computation is ``term``'s (``TurnKLTerm``)."""

    def __init__(self, term: TurnKLTerm) -> None:
        self.term = term
        self.targets: list[TurnTarget] = []
        """This rank's targets this step."""
        self.anchors: list[AnchorRow] = []
        """This rank's anchor rows this step (none with ``anchor_weight`` 0)."""
        self.norm = TurnNorm.of("per_target_token", 0.0)
        """This step's divisors, from every rank's counts."""

    @property
    def tokens(self) -> float:
        """This step's target tokens on every rank (0: no rank has a target)."""
        return self.norm.target_tokens

    def collect(self, rollout: Rollout) -> dict[str, float]:
        term = self.term
        targets = [t for t in term.targets(rollout.samples) if t.length > 0]
        if not term.engine_is_policy():  # the engine's logprobs of the turn, for the importance ratio
            targets = [replace(t, engine_logprobs=turn_engine_logprobs(rollout.samples[t.episode], t)) for t in targets]
        self.targets, self.anchors = targets, term.anchor_rows(rollout.samples, targets)
        self.norm = term.turn_norm(rollout.samples, targets, self.anchors)
        return {
            "distill/targets": term.ranks.sum(len(targets)),
            "distill/target_tokens": self.tokens,
            "distill/temperature": term.temperature(),
        }

    def rows(self) -> int:
        return len(self.targets) + len(self.anchors)

    def active(self) -> bool:
        return bool(self.tokens)

    def loss(self, rows: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        every = [*self.targets, *self.anchors]
        group = [every[i] for i in rows.tolist()]
        loss, stats = self.term.turn_kl_loss(group, self.norm, float(self.term.ranks.size))
        stats["distill/loss"] = float(loss.detach())
        return loss, stats

    def after_step(self, totals: dict[str, float]) -> dict[str, float]:
        self.term.update_ema()
        return self.term.turn_stats(totals, "distill/loss") if self.tokens else totals


class GRPOTurnKLModule(TurnKLTerm, GRPOModule):
    """GRPO on the datamodule's reward plus the turn-targeted KL term on the turns ``hints`` names.

    Args:
        hints: which turns to target and with what (``propel.rollouts.hints.ErrorHints``, ``StaticHints``, ...).
        turn_kl: the turn term's settings (``TurnKLSpec``: divergence, teacher, coefficient, temperatures, hint
            message, control hint, EMA decay), the same object the distillation trainer takes.
        importance_cap: truncation of the importance ratio of the turn term (engines other than the policy) and of
            GRPO's correction.
        **kwargs: GRPO's settings (``GRPOModule``: rewards, loss, group_size, ...; and the policy's).
    """

    _turn_logprobs = staticmethod(turn_engine_logprobs)

    def __init__(
        self,
        hints: HintSource,
        turn_kl: TurnKLSpec | None = None,
        importance_cap: float = 3.0,
        **kwargs,
    ) -> None:
        super().__init__(importance_cap=importance_cap, **kwargs)
        self.hints, self.turn_kl = hints, turn_kl or TurnKLSpec()
        self.loss_terms.append(TurnKLLoss(self))

    def setup_policy(self) -> None:
        super().setup_policy()
        self.setup_turn_kl(self.hparams.dtype)
