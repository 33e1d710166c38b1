"""The turn-targeted KL term as a loss term of a policy step (``propel.lit_modules.loss_terms.LossTerm``).

GRPO with a turn-KL term lists it beside its clipped policy loss; the distillation trainer steps on it alone. Either
way one optimizer step runs over its rows (the targets, then the anchor's rows on their other turns) through
``LoRAPolicyModule.step_on_terms``, the loss over the step's divisors (``TurnKLSpec.normalisation``) from every
rank's counts, and the EMA teacher is updated after every optimizer step. The computation is the term's
(``propel.lit_modules.turn_kl.TurnKLTerm``).
"""

from __future__ import annotations

from dataclasses import replace

import torch

from propel.lit_modules.turn_kl import AnchorRow, TurnKLTerm, turn_engine_logprobs
from propel.losses.turn_normalisation import TurnNorm
from propel.records import Sample
from propel.rollouts.hints import TurnTarget
from propel.rollouts.steps import Rollout


class TurnKLLoss:
    """One step's turn-KL rows and the divisors they are summed over."""

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

    def use(self, samples: list[Sample], targets: list[TurnTarget]) -> None:
        """Step on these ``targets`` of ``samples`` (and their anchor rows); every rank must call it."""
        self.targets, self.anchors = targets, self.term.anchor_rows(samples, targets)
        self.norm = self.term.turn_norm(samples, targets, self.anchors)

    def collect(self, rollout: Rollout) -> dict[str, float]:
        """GRPO's step: the targets the hint source names on the step's own rollouts."""
        term = self.term
        targets = [t for t in term.targets(rollout.samples) if t.length > 0]
        if not term.owner.engine_is_policy():  # the engine's logprobs of the turn, for the importance ratio
            targets = [replace(t, engine_logprobs=turn_engine_logprobs(rollout.samples[t.episode], t)) for t in targets]
        self.use(rollout.samples, targets)
        return term.named(targets, self.tokens)  # the divisors summed the target tokens already

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
