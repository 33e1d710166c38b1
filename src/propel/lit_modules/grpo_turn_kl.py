"""GRPO with a turn-targeted KL term: the verifiable reward's policy gradient and, on the turns a hint source names,
the pull toward the policy-with-a-hint, in one optimizer step (reward, then targeted alignment, then one
clipped policy update).

Each step's episodes are scored and turned into GRPO's clipped loss as ``GRPOModule`` does; the same episodes are
handed to the hint source, and its targets add ``kl_coefficient`` times the mean turn-t divergence (``TurnKLTerm``)
to the loss. The term is one more loss source of GRPO's step (``TurnKLLoss``, a ``LossTerm``): the combined loss is
written once, in ``GRPOModule.step_loss``; the micro-batches run over GRPO's rows first and the targets after, so the
gradients of both terms are summed before the one clipped update. Every term is logged on its own
(``train/clipped_ratio``, ``train/kl`` ... for GRPO, ``train/distill/loss``, ``train/distill/divergence``,
``train/distill/control_divergence`` for the turn term). The turn's tokens are the rollout's own samples, so the
term is on-policy by construction; with an engine that is not the policy (vLLM) each token is weighted by the
truncated importance ratio policy/engine. A step where GRPO takes no update (every group filtered for zero variance)
still takes the turn term's. The EMA teacher is updated after every optimizer step, including steps without targets.

Data-parallel: whether there are targets is decided on the global count and the turn term is normalised by the
global target token count times the world size (``TurnKLTerm``); a rank without targets, or without any row at all,
still joins each optimizer step (GRPO's placeholder row, or ``optimization_step``'s zero-weighted forward).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from propel.lit_modules.grpo import GRPOModule
from propel.lit_modules.turn_kl import TurnKLSpec, TurnKLTerm
from propel.rollouts.hints import HintSource, TurnTarget
from propel.rollouts.record import Sample
from propel.rollouts.steps import Rollout


def turn_engine_logprobs(sample: Sample, target: TurnTarget) -> list[float] | None:
    """The engine's logprobs of the target's tokens: its turn's, or a whole-sequence span's (NaN, weight 1, on the
    observations between its turns, which the loss does not read); None when they do not line up."""
    logprobs, k = [], -1
    for turn in sample.all_turns:
        k += turn.trainable
        if k < target.turn or (turn.trainable and k not in target.covered):
            continue
        if k > target.covered[-1] or (not turn.trainable and k == target.covered[-1]):
            break
        known = turn.logprobs if turn.trainable else None
        logprobs += list(known) if known is not None else [float("nan")] * len(turn.token_ids)
    if len(logprobs) != target.length or all(v != v for v in logprobs):
        return None
    return logprobs


class TurnKLLoss:
    """The turn-targeted KL term as one more loss source of a GRPO step (``propel.lit_modules.grpo.LossTerm``):
    targets named on the step's own rollouts, ``kl_coefficient`` times their mean turn-t divergence as the loss, the
    EMA teacher's update after every optimizer step. The term's computation is ``term``'s (``TurnKLTerm``)."""

    def __init__(self, term: TurnKLTerm) -> None:
        self.term = term
        self.targets: list[TurnTarget] = []
        """This rank's targets this step."""
        self.tokens = 0.0
        """This step's target tokens on every rank (0: no rank has a target)."""

    def collect(self, rollout: Rollout) -> dict[str, float]:
        term = self.term
        targets = [t for t in term.targets(rollout.samples) if t.length > 0]
        if not term.engine_is_policy():  # the engine's logprobs of the turn, for the importance ratio
            targets = [replace(t, engine_logprobs=turn_engine_logprobs(rollout.samples[t.episode], t)) for t in targets]
        self.targets, self.tokens = targets, term.turn_tokens(targets)
        return {
            "distill/targets": term.ranks.sum(len(targets)),
            "distill/target_tokens": self.tokens,
            "distill/temperature": term.temperature(),
        }

    def rows(self) -> int:
        return len(self.targets)

    def active(self) -> bool:
        return bool(self.tokens)

    def loss(self, rows: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        loss, stats = self.term.turn_kl_loss([self.targets[i] for i in rows.tolist()], self.tokens,
                                             float(self.term.ranks.size))  # fmt: skip
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
