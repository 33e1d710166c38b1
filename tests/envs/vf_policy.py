"""Scripted policies for the verifiers environments the tests train on, and a callback recording each step.

The tiny random model writes neither poems nor blackjack moves, so every group would score alike and no reward would
reach an advantage. Each policy answers at random from a few replies with different scores (seeded: a run sees the
same sequence); the policy still trains on the scripted tokens, as in the OpenEnv tests.
"""

from __future__ import annotations

import random
import re

from lightning.pytorch.callbacks import Callback

from propel.engines.scripted import ScriptedEngine

HAIKU = "Waves crash on the rocks\nlight turns in the dark tower\none last watch ends now"
POEMS = (HAIKU, "x", "the\nthe\nthe", "")
MOVES = ("hit", "stick", "maybe")
"""A blackjack reply: a hit below 12 (no card can bust it, so the game goes on), else one of these at random."""
STEPS: list[dict] = []
"""Per step: ``metrics`` (the logged ``train/`` values) and ``state`` (the module's ``rollout_state``)."""


class _Scripted(Callback):
    replies: tuple[str, ...] = ()

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def reply(self, prompt: str) -> str:
        return self.rng.choice(self.replies)

    def on_train_start(self, trainer, pl_module) -> None:
        pl_module.engine = ScriptedEngine(pl_module.tokenizer, self.reply)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        metrics = {k: float(v) for k, v in trainer.callback_metrics.items() if k.startswith("train/")}
        STEPS.append({"metrics": metrics, "state": pl_module.rollout_state})


class ScriptedPoet(_Scripted):
    replies = POEMS


class ScriptedPlayer(_Scripted):
    replies = MOVES

    def reply(self, prompt: str) -> str:
        total = int(re.findall(r"Your hand totals (\d+)", prompt)[-1])
        return "hit" if total < 12 else super().reply(prompt)
