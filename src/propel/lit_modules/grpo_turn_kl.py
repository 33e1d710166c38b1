"""GRPO with a turn-targeted KL term: the verifiable reward's policy gradient and, on the turns a hint source names,
the pull toward the policy-with-a-hint, in one optimizer step (reward, then targeted alignment, then one
clipped policy update).

Each step's episodes are scored and turned into GRPO's clipped loss as ``GRPOModule`` does; the same episodes are
handed to the hint source, and its targets add ``kl_coefficient`` times the turn-t divergence over the step's divisor
(``TurnKLTerm``, a collaborator of the module; with ``anchor_weight`` also the anchor on the targeted episodes' other
turns) to the loss. The term is one more loss term of GRPO's step (``propel.lit_modules.turn_kl_loss.TurnKLLoss``,
listed before GRPO's clipped loss): the step's terms are summed in one place
(``propel.lit_modules.loss_terms.summed_loss``); the micro-batches run over the targets first and GRPO's rows after,
so the gradients of both terms are summed before the one clipped update. Every term is logged on its own
(``train/clipped_ratio``, ``train/kl`` ... for GRPO, ``train/distill/loss``, ``train/distill/divergence``,
``train/distill/control_divergence`` for the turn term). The turn's tokens are the rollout's own samples, so the term
is on-policy by construction; with an engine that is not the policy (vLLM) each token is weighted by the truncated
importance ratio policy/engine. A step where GRPO takes no update (every group filtered for zero variance) still
takes the turn term's. The EMA teacher is updated after every optimizer step, including steps without targets.

Data-parallel: whether there are targets is decided on the global count and the turn term is normalised by the
global target token count times the world size (``TurnKLTerm``); a rank without targets, or without any row at all,
still joins each optimizer step (GRPO's placeholder row, or ``optimization_step``'s zero-weighted forward).
"""

from __future__ import annotations

from typing import Any

from propel.lit_modules.grpo import GRPOModule
from propel.lit_modules.turn_kl import TurnKLSpec, TurnKLTerm
from propel.lit_modules.turn_kl_loss import TurnKLLoss
from propel.rollouts.hints import HintSource


class GRPOTurnKLModule(GRPOModule):
    """GRPO on the datamodule's reward plus the turn-targeted KL term on the turns ``hints`` names.

    Args:
        hints: which turns to target and with what (``propel.rollouts.hints.ErrorHints``, ``StaticHints``, ...).
        turn_kl: the turn term's settings (``TurnKLSpec``: divergence, teacher, coefficient, temperatures, hint
            message, control hint, EMA decay), the same object the distillation trainer takes.
        importance_cap: truncation of the importance ratio of the turn term (engines other than the policy) and of
            GRPO's correction.
        **kwargs: GRPO's settings (``GRPOModule``: rewards, loss, group_size, ...; and the policy's).
    """

    supports_async_rollouts = False  # the turn term is on-policy by construction (its targets are this step's turns)

    def __init__(
        self,
        hints: HintSource,
        turn_kl: TurnKLSpec | None = None,
        importance_cap: float = 3.0,
        **kwargs,
    ) -> None:
        super().__init__(importance_cap=importance_cap, **kwargs)
        self.hints, self.turn_kl = hints, turn_kl or TurnKLSpec()
        self.turn_term = TurnKLTerm(self)
        """The turn-targeted KL term (targets, teachers, loss, EMA teacher), a collaborator of this module."""
        self.loss_terms.append(TurnKLLoss(self.turn_term))

    def setup_policy(self) -> None:
        super().setup_policy()
        self.turn_term.setup(self.hparams.dtype)

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_save_checkpoint(checkpoint)
        self.turn_term.save(checkpoint)

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        self.turn_term.load(checkpoint)
