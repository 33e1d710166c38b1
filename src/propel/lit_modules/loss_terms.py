"""What a loss term of a policy step is, and the one place a step's terms become one loss.

A step's loss is a list of terms (GRPO's clipped policy loss, the turn-targeted KL, ...). Each term names its own
rows for the step; the rows of all terms share one index space, in the order of the list, which the policy base cuts
into micro-batches (``LoRAPolicyModule.step_on_terms``). In each micro-batch every term with rows there computes its
share of the loss, in the list's order, and the shares are summed before one backward: the gradients of all terms
meet in the one clipped optimizer update. A term that swaps weights in place to compute its loss (the EMA teacher)
is listed before the terms whose graph it must not see.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import torch

from propel.rollouts.steps import Rollout


class LossTerm(Protocol):
    """One loss source of a policy step: GRPO's clipped policy loss (``propel.lit_modules.grpo.PolicyGradientLoss``)
    or the turn-targeted KL (``propel.lit_modules.turn_kl_loss.TurnKLLoss``)."""

    def collect(self, rollout: Rollout) -> dict[str, float]:
        """Name this step's rows on its rollouts (before they are scored); returns the statistics to log. Every
        rank calls it."""

    def rows(self) -> int:
        """This rank's rows this step: rows ``0..rows()`` of ``loss``."""

    def active(self) -> bool:
        """Whether any rank has rows this step (the same answer on every rank)."""

    def loss(self, rows: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        """The micro-batch's share of the term over its ``rows``, and of each statistic."""

    def after_step(self, totals: dict[str, float]) -> dict[str, float]:
        """After every optimizer step, rows or not: the step's totals with the term's statistics."""


def spans(terms: Sequence[LossTerm]) -> tuple[list[tuple[LossTerm, int, int]], int]:
    """Each term's ``[start, end)`` in the step's one index space (the terms' rows in list order), and its size."""
    out, end = [], 0
    for term in terms:
        out.append((term, end, end + term.rows()))
        end += term.rows()
    return out, end


def summed_loss(placed: list[tuple[LossTerm, int, int]]):
    """The loss of a micro-batch whose ``rows`` index the step's index space: the sum, in the terms' order, of each
    term's loss over its rows there (each already its share of the step's normalisation), and their statistics."""

    def loss(rows: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
        total, stats = None, {}
        for term, start, end in placed:
            mine = rows[(rows >= start) & (rows < end)] - start
            if len(mine):
                part, part_stats = term.loss(mine)
                total = part if total is None else total + part
                stats.update(part_stats)
        return total, stats

    return loss
