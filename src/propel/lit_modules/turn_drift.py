"""Per-turn drift: how far the student has moved from its start on each turn of held-aside episodes.

A turn-targeted update is meant to change turn t and leave the other turns alone. The drift matrix says whether it
did: on a few episodes set aside at the first step (never trained on; their hint source named a turn t), the
per-token KL(start || now) of every assistant turn, teacher-forced on the episode's own tokens, in nats per token,
read as the turns before t, at t and after t (and by offset from t), beside the target turn's gain: how much closer
the student came to the teacher on turn t (the term's divergence at the start minus now, against the same teacher).

The start is the policy with its adapters off. LoRA starts with a zero adapter (peft's ``B = 0``), so with the
adapter off the policy computes exactly the step-0 logits, bit for bit: no copy of the initial adapter to keep,
swap in or checkpoint, and a resumed run measures against the same start. (A run whose adapter did not start at
zero is refused at the first measurement: its step-0 drift would not be 0.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from propel.losses.distillation import DivergenceSpec, token_divergence
from propel.models.reference import reference_forward
from propel.rollouts.episode_rows import EpisodeRow
from propel.rollouts.hints import TurnTarget

SIDES = ("before", "at", "after", "off_target")
"""The matrix's cells by position relative to t (``off_target``: before and after together)."""


@dataclass
class HeldAside:
    """One held-aside episode: its rows and the target its hint source named (turn t, the student's and the
    teacher's ids)."""

    rows: list[EpisodeRow]
    target: TurnTarget

    def state(self) -> dict[str, Any]:
        """Plain lists and numbers (what a checkpoint and a collective carry)."""
        t = self.target
        return {"rows": [[r.ids, r.turns] for r in self.rows], "turn": t.turn, "hint": t.hint,
                "student_ids": t.student_ids, "teacher_ids": t.teacher_ids, "length": t.length, "mask": t.mask,
                "through": t.through}  # fmt: skip

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> HeldAside:
        rows = [EpisodeRow(list(ids), list(turns)) for ids, turns in state["rows"]]
        target = TurnTarget(-1, int(state["turn"]), state["hint"], list(state["student_ids"]),
                            list(state["teacher_ids"]), int(state["length"]), None, state["mask"],
                            state["through"])  # fmt: skip
        return cls(rows, target)


@dataclass
class DriftMatrix:
    """One measurement: per held-aside episode and assistant turn, KL(start || now) summed over the turn's tokens
    and the token count; each episode's t; the term's divergence to the teacher on turn t at the start and now."""

    kl: list[list[float]]
    tokens: list[list[int]]
    turns: list[int]
    target_start: float
    target_now: float
    target_tokens: int

    def _per_token(self, keep) -> float | None:
        """Per-token KL over the (episode, turn) pairs ``keep(turn - t)`` selects; None without tokens."""
        total = count = 0.0
        for kl, tokens, t in zip(self.kl, self.tokens, self.turns, strict=True):
            for k, (value, n) in enumerate(zip(kl, tokens, strict=True)):
                if keep(k - t):
                    total, count = total + value, count + n
        return total / count if count else None

    def cell(self, side: str) -> float | None:
        """Per-token KL(start || now) on the turns ``before`` t, ``at`` t, ``after`` t, or ``off_target`` (before
        and after); None where the held-aside episodes have no such tokens."""
        keep = {"before": lambda o: o < 0, "at": lambda o: o == 0, "after": lambda o: o > 0,
                "off_target": lambda o: o != 0}[side]  # fmt: skip
        return self._per_token(keep)

    def offsets(self) -> dict[int, float]:
        """Per-token KL(start || now) by offset from t (-1: the turn before t), over the held-aside episodes."""
        present = sorted({k - t for kl, t in zip(self.kl, self.turns, strict=True) for k in range(len(kl))})
        out = {o: self._per_token(lambda d, o=o: d == o) for o in present}
        return {o: v for o, v in out.items() if v is not None}

    @property
    def gain(self) -> float:
        """Per target token: the term's divergence to the teacher at the start minus now (> 0: closer)."""
        return (self.target_start - self.target_now) / max(self.target_tokens, 1)

    def logged(self) -> dict[str, float]:
        """The scalars to log (``drift/<side>``, ``drift/t-1`` ... by offset, ``drift/gain``,
        ``drift/target_divergence``): the same keys at every measurement of one held-aside set."""
        out = {f"drift/{s}": v for s in SIDES if (v := self.cell(s)) is not None}
        out |= {f"drift/{offset_name(o)}": v for o, v in self.offsets().items()}
        out["drift/gain"] = self.gain
        out["drift/target_divergence"] = self.target_now / max(self.target_tokens, 1)
        return out

    def record(self, step: int, **extra: Any) -> dict[str, Any]:
        """One line of the run folder's ``turn_drift.jsonl``: the scalars, and the whole matrix (per episode and
        turn, KL per token; None for a turn without tokens) with each episode's t."""
        matrix = [[v / n if n else None for v, n in zip(kl, tokens, strict=True)]
                  for kl, tokens in zip(self.kl, self.tokens, strict=True)]  # fmt: skip
        return {"step": step, **self.logged(), "target_turns": self.turns, "matrix": matrix, **extra}


def offset_name(offset: int) -> str:
    """``t`` for turn t, ``t-1`` for the turn before it, ``t+2`` two after."""
    return "t" if offset == 0 else f"t{offset:+d}"


def measure_drift(term, held: list[HeldAside], batch: int = 4) -> DriftMatrix:
    """The drift matrix of ``term`` (a LoRA policy's ``TurnKLTerm``) on ``held``: every row once with the adapter
    and once without, dropout off, no gradient; the target turn's divergence with the term's spec at temperature 1."""
    rows = [(e, row) for e, h in enumerate(held) for row in h.rows]
    n_turns = [1 + max(max(r.turns) for r in h.rows) for h in held]
    kl = [[0.0] * n for n in n_turns]
    tokens = [[0] * n for n in n_turns]
    forward_kl = DivergenceSpec("forward_kl")
    with term.eval_mode(), torch.no_grad():
        for i in range(0, len(rows), batch):
            chunk = rows[i : i + batch]
            ids, lengths = [r.ids for _, r in chunk], [r.length for _, r in chunk]
            now = term.turn_logits(ids, lengths, "student")
            with reference_forward(term.policy):
                start = term.turn_logits(ids, lengths, "student")
            per_token = token_divergence(now, start, forward_kl).cpu()  # KL(start || now), (B, T)
            for b, (e, row) in enumerate(chunk):
                for j, k in enumerate(row.turns[row.first :]):
                    if k >= 0:
                        kl[e][k] += float(per_token[b, j])
                        tokens[e][k] += 1
        targets = [h.target for h in held]
        lengths, spec = [t.length for t in targets], term.spec.divergence
        mask = term.target_mask(targets)
        teacher = term.turn_logits([t.teacher_ids for t in targets], lengths, "teacher")
        now = term.turn_logits([t.student_ids for t in targets], lengths, "student")
        with reference_forward(term.policy):
            start = term.turn_logits([t.student_ids for t in targets], lengths, "student")
        target_now = float((token_divergence(now, teacher, spec) * mask).sum())
        target_start = float((token_divergence(start, teacher, spec) * mask).sum())
    return DriftMatrix(kl, tokens, [t.turn for t in targets], target_start, target_now, int(mask.sum()))
