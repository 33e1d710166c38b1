"""GRPO with a turn-targeted KL term: the verifiable reward's policy gradient and, on the turns a hint source names,
the pull toward the policy-with-a-hint, in one optimizer step (reward, then targeted alignment, then one
clipped policy update).

Each step's episodes are scored and turned into GRPO's clipped loss as ``GRPOModule`` does; the same episodes are
handed to the hint source, and its targets add ``kl_coefficient`` times the mean turn-t divergence
(``TurnKLTerm``) to the loss. The micro-batches run over GRPO's rows first and the targets after, so the gradients
of both terms are summed before the one clipped update. Every term is logged on its own (``train/clipped_ratio``,
``train/kl`` ... for GRPO, ``train/distill/loss``, ``train/distill/divergence``, ``train/distill/control_divergence``
for the turn term). The turn's tokens are the rollout's own samples, so the term is on-policy by construction; with
an engine that is not the policy (vLLM) each token is weighted by the truncated importance ratio policy/engine.
A step where GRPO takes no update (every group filtered for zero variance) still takes the turn term's. The EMA
teacher is updated after every optimizer step, including steps without targets.

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
from propel.rollouts.steps import ContextBatch, Rollout


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

    def __init__(
        self,
        hints: HintSource,
        turn_kl: TurnKLSpec | None = None,
        importance_cap: float = 3.0,
        **kwargs,
    ) -> None:
        super().__init__(importance_cap=importance_cap, **kwargs)
        self.hints, self.turn_kl = hints, turn_kl or TurnKLSpec()
        self._turn_targets: list[TurnTarget] = []
        self._turn_tokens = 0.0
        """This step's target tokens on every rank (0: no rank has a target)."""
        self._turn_stats: dict[str, float] = {}

    def setup_policy(self) -> None:
        super().setup_policy()
        self.setup_turn_kl()

    def collect_rollout(self, batch: ContextBatch) -> Rollout:
        """GRPO's rollouts, and this step's turn targets named on them (the rollout's own tokens)."""
        rollout = super().collect_rollout(batch)
        targets = [t for t in self.targets(rollout.samples) if t.length > 0]
        if not self.engine_is_policy():  # the engine's logprobs of the turn, for the importance ratio
            targets = [replace(t, engine_logprobs=self._turn_logprobs(rollout.samples[t.episode], t)) for t in targets]
        self._turn_targets, self._turn_tokens = targets, self.turn_tokens(targets)
        self._turn_stats = {
            "distill/targets": self.ranks.sum(len(targets)),
            "distill/target_tokens": self._turn_tokens,
            "distill/temperature": self.temperature(),
        }
        return rollout

    @staticmethod
    def _turn_logprobs(sample, target: TurnTarget) -> list[float] | None:
        """The engine's logprobs of the target's tokens: its turn's, or a whole-sequence span's (NaN, weight 1, on
        the observations between its turns, which the loss does not read); None when they do not line up."""
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

    def optimization_step(self, n_rows: int, micro_loss):
        """GRPO's rows ``0..n_rows`` and then the turn targets, in one optimizer step (gradients summed); then the
        EMA teacher's update (after every optimizer step, targets or not)."""
        targets, n_tok, share = self._turn_targets, self._turn_tokens, float(self.ranks.size)

        def combined(rows: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            ours, theirs = rows[rows < n_rows], rows[rows >= n_rows] - n_rows
            loss, stats = torch.zeros((), device=self.device), {}
            if len(theirs):  # first: the EMA teacher swaps weights in place, before any graph of this micro-batch
                loss, stats = self.turn_kl_loss([targets[i] for i in theirs.tolist()], n_tok, share)
                stats["distill/loss"] = float(loss.detach())
            if len(ours):
                grpo_loss, grpo_stats = micro_loss(ours)
                loss = loss + grpo_loss
                stats.update(grpo_stats)
            return loss, stats

        totals = super().optimization_step(n_rows + len(targets), combined if targets else micro_loss)
        self.update_ema()
        return self.turn_stats(totals, "distill/loss") if n_tok else totals

    def training_step(self, batch: ContextBatch, batch_idx: int) -> None:
        step = self.global_step
        super().training_step(batch, batch_idx)
        log = {"on_step": True, "sync_dist": self.ranks.size > 1}
        if self.global_step == step and self._turn_tokens:  # GRPO took no update: the turn term still does
            stats = self.optimization_step(0, lambda rows: (torch.zeros((), device=self.device), {}))
            self.log("train/loss", stats.pop("loss"), prog_bar=True, batch_size=1, **log)
            self._turn_stats.update(stats)
        self.log_dict({f"train/{k}": v for k, v in self._turn_stats.items()}, batch_size=1, **log)
