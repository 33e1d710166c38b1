"""Turn-targeted KL distillation: pull the policy toward itself-with-a-hint on one turn of an agent episode.

Each step runs the datamodule's episodes with the current policy (``EpisodeDataModule``), asks a ``HintSource``
which turns went wrong and what would have helped, and builds for each target the student's exact context up to
turn t and the teacher's, the same ids with the hint spliced in as a message before turn t
(``propel.rollouts.hints``). The term itself (targets, teachers, the loss, the wrong-hint control) is
``propel.lit_modules.turn_kl.TurnKLTerm``, a collaborator of this module; its loss term
(``propel.lit_modules.turn_kl_loss.TurnKLLoss``) is the one this trainer steps on, alone, where
``GRPOTurnKLModule`` steps on it beside GRPO's clipped loss.

On-policy (``on_policy=True``), the student first regenerates turn t from its own hint-free prefix through the
rollout engine and the loss is taken on those fresh tokens (with ``reverse_kl`` this is on-policy distillation),
each token weighted by the truncated importance ratio policy/engine when the engine is not the policy (vLLM).
Guards against the teacher-student shift (the teacher sees a hint the student never does): hints can be phased in
(``hint_share`` grows the share of targets used over the run), and every step measures the drift. With
``drift_episodes`` the first step sets that many targeted episodes aside (never trained on) and every step logs their
drift matrix (``propel.lit_modules.turn_drift``): KL(start || now) in nats per token on the turns before t, at t and
after t, beside the target turn's gain, to the logger and to ``turn_drift.jsonl`` in the run folder. Without it, the
step's own change is measured -- KL(before || after) per token on the step's assistant turns that were not targeted,
or on a fixed held-out set of turns never trained on. Past ``max_drift`` (nats per token: the matrix's off-target
cell, or the step's change) the step is marked unstable and, with ``rollback``, undone (adapter weights, optimizer
state and the EMA teacher restored): with the matrix, no kept step leaves the other turns more than ``max_drift``
from the start.

Data-parallel (``trainer.strategy: ddp``): every decision is taken on the global batch, as one process would take
it. The targets ``hint_share`` keeps are the first of the global batch (ranks in order), whether to step is decided
on the global target count (a rank without targets joins the all-reduce with a zero gradient), the term is
normalised by the global counts (``TurnKLTerm``), the held-aside episodes are the global batch's first targeted ones
(gathered: every rank measures all of them, and the value the check reads is all-reduced), the drift rows are the
global batch's first ``drift_rows`` (the held-out set is gathered, so every rank and the checkpoint hold the same one)
and the drift is a global mean: every rank reaches the same rollback decision and undoes the same step. The EMA
teacher updates after every optimizer step, on every rank, and a rollback restores it with the step it undoes.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import torch

from propel.errors import ConfigError
from propel.lit_modules.lora_policy import LoRAPolicyModule
from propel.lit_modules.state import RolloutState
from propel.lit_modules.turn_drift import DriftMatrix, HeldAside, measure_drift
from propel.lit_modules.turn_kl import TurnKLSpec, TurnKLTerm
from propel.lit_modules.turn_kl_loss import TurnKLLoss
from propel.losses.distillation import DivergenceSpec, token_divergence
from propel.rollouts.episode_rows import episode_rows
from propel.rollouts.episode_stats import episode_stats
from propel.rollouts.hints import Hint, HintSource, TurnTarget, turn_context
from propel.rollouts.steps import ContextBatch

Row = tuple[list[int], int]
"""Token ids ending with an assistant turn, and that turn's length (a turn the drift is measured on)."""


class TurnKLDistillModule(LoRAPolicyModule):
    """Turn-targeted KL distillation of a LoRA policy on its own agent episodes.

    Args:
        hints: which turns to target and with what (``propel.rollouts.hints.ErrorHints``, ``StaticHints``, ...).
        turn_kl: the turn term's settings (``TurnKLSpec``: divergence, teacher, coefficient, temperatures, hint
            message, control hint, EMA decay), the same object ``GRPOTurnKLModule`` takes.
        group_size: episodes rolled out per task each step, as GRPO's ``group_size`` (the same rollouts of the
            same context); 1 is allowed here, since no advantage is taken within the group.
        on_policy: regenerate turn t with the student and take the loss on its own tokens (see the module docstring).
        importance_cap: truncation of the on-policy importance ratio (vLLM engines).
        hint_share: share of the named targets used, from the first step to the last (linear): ``[0.25, 1.0]``
            phases hints in; ``[1.0, 1.0]`` uses all from the start.
        max_drift: nats per token above which a step counts as unstable: with ``drift_episodes``, the drift
            matrix's off-target cell (KL(start || now) on the held-aside episodes' turns before and after t); without,
            the step's own KL(before || after) on ``drift_rows`` non-target turns.
        rollback: undo unstable steps.
        drift_episodes: targeted episodes set aside at the first step with targets (never trained on, kept in the
            checkpoint) whose drift matrix every step measures and logs (0: none; the step's change is measured
            instead).
        drift_rows: without ``drift_episodes``, non-target turns measured per step for the step's change (0: none).
        drift_set: without ``drift_episodes``, which turns the step's change is measured on: ``targeted`` (the
            step's targeted episodes' other turns) or ``held_out`` (a fixed set of assistant turns from the first
            step's untargeted episodes, never trained on, kept in the checkpoint; the targeted episodes' other turns
            stand in until such episodes exist).
        **kwargs: the policy's settings (``LoRAPolicyModule``: model, lora, sampling, lr, gradient_clip_val, ...);
            its ``max_steps_without_update`` counts the steps that find nothing to target (no optimizer step is
            taken without targets, so the step count would never reach ``max_steps``): that many in a row stop the
            run with an error, and each is warned about and counted.
    """

    def __init__(
        self,
        hints: HintSource,
        turn_kl: TurnKLSpec | None = None,
        group_size: int = 2,
        on_policy: bool = False,
        importance_cap: float = 3.0,
        hint_share: Sequence[float] = (1.0, 1.0),
        max_drift: float | None = None,
        rollback: bool = False,
        drift_episodes: int = 0,
        drift_rows: int = 8,
        drift_set: str = "targeted",
        **kwargs,
    ) -> None:
        if group_size < 1:
            raise ConfigError(f"group_size must be >= 1, got {group_size}")
        if len(hint_share) != 2 or not all(0.0 < x <= 1.0 for x in hint_share):
            raise ConfigError(f"hint_share must be [start, end] with each in (0, 1], got {list(hint_share)}")
        if rollback and max_drift is None:
            raise ConfigError("rollback needs max_drift (the drift above which a step is undone)")
        if drift_rows < 0 or drift_episodes < 0:
            raise ConfigError(f"drift_rows and drift_episodes must be >= 0, got {drift_rows} and {drift_episodes}")
        if drift_set not in ("targeted", "held_out"):
            raise ConfigError(f"drift_set must be 'targeted' or 'held_out', got {drift_set!r}")
        super().__init__(**kwargs)
        self.hints, self.turn_kl = hints, turn_kl or TurnKLSpec()
        self.turn_term = TurnKLTerm(self)
        """The turn-targeted KL term (targets, teachers, loss, EMA teacher), a collaborator of this module."""
        self.turn_loss = TurnKLLoss(self.turn_term)
        """The term's rows of a step: the loss this trainer steps on."""
        if on_policy and self.turn_kl.scope != "turn":
            raise ConfigError("on_policy regenerates turn t alone: it needs turn_kl.scope='turn'")
        self.sampling.n = group_size
        self._held_out: list[Row] = []
        """The drift's fixed held-out turns (``drift_set: held_out``), chosen at the first step."""
        self._held_aside: list[HeldAside] = []
        """The drift matrix's held-aside episodes (``drift_episodes``), chosen at the first step with targets."""

    def setup_policy(self) -> None:
        self.turn_term.setup(self.hparams.dtype)

    def hint_fraction(self) -> float:
        """The share of named targets used at this step (``hint_share``, linear over the run)."""
        start, end = self.hparams.hint_share
        progress = self.progress()
        return end if progress is None else start + (end - start) * progress

    # ---------------------------------------------------------------------------------------------- step
    def training_step(self, batch: ContextBatch, batch_idx: int) -> None:
        rollout = self.collect_rollout(batch)
        samples = rollout.samples
        self.rollout_state = RolloutState(step=self.global_step, samples=samples, rewards=None)
        term = self.turn_term
        targets = term.targets(samples)
        named = term.named(targets)
        found = named["distill/targets"]
        stats = {**episode_stats(samples), **{f"time/{k}": v for k, v in rollout.timings.items()}, **named}
        if self.hparams.drift_episodes and not self._held_aside:  # the same on every rank (gathered)
            targets = self._hold_aside(samples, targets)
            found = self.ranks.sum(len(targets))
        targets = targets[: self.ranks.prefix(len(targets), math.ceil(self.hint_fraction() * found))]
        if self.hparams.on_policy and targets:
            targets = self._regenerate(targets)
        targets = [t for t in targets if t.length > 0]
        used = self.ranks.sum(len(targets))
        stats["distill/targets_used"] = used
        log = {"on_step": True, "batch_size": max(1, int(used)), "sync_dist": self.ranks.size > 1}
        if not used:  # no optimizer step: the base counts, warns and stops after max_steps_without_update
            self.no_update(
                "the hint source named no turn to target in these episodes (solved, or no errors)",
                "check `hints`, or raise max_steps_without_update",
            )
            self.log_dict({f"train/{k}": v for k, v in stats.items()}, **log)
            return
        matrix = bool(self._held_aside)  # the same on every rank: the held-aside set is gathered
        drift_rows = [] if matrix else self._drift_rows(samples, targets)
        measured = not matrix and self.ranks.sum(len(drift_rows)) > 0  # the same on every rank: _drift all-reduces
        before = self._logits(drift_rows) if drift_rows else None
        snapshot = self._snapshot() if self.hparams.rollback else None
        stats.update(self._optimize(targets, samples))
        if matrix:
            stats.update(self._matrix_check(snapshot))
        elif measured:
            stats.update(self._drift(drift_rows, before, snapshot))
        self.log("train/loss", stats.pop("loss"), prog_bar=True, **log)
        self.log_dict({f"train/{k}": v for k, v in stats.items()}, **log)

    def _regenerate(self, targets: list[TurnTarget]) -> list[TurnTarget]:
        """On-policy: turn t sampled afresh by the student (the rollout engine) from its own hint-free prefix."""
        from propel.records import Prompt

        self.sync_engine()
        prompts = [Prompt(token_ids=t.student_ids[: len(t.student_ids) - t.length]) for t in targets]
        groups = self.engine.generate(prompts, replace(self.sampling, n=1))
        return [t.regenerated(g[0].token_ids, g[0].logprobs) for t, g in zip(targets, groups, strict=True)]

    # ------------------------------------------------------------------------------------------------ drift
    def _hold_aside(self, samples, targets: list[TurnTarget]) -> list[TurnTarget]:
        """Set aside the global batch's first ``drift_episodes`` targeted episodes (ranks in order) for the drift
        matrix, each with its first named turn as t (turn scope); every rank gets all of them, and measures the start
        once (step 0: exactly 0 everywhere, or the start is not the adapters-off policy). Returns the targets left
        to train on. Every rank must call it."""
        episodes = list(dict.fromkeys(t.episode for t in targets))
        mine = episodes[: self.ranks.prefix(len(episodes), self.hparams.drift_episodes)]
        held = []
        for e in mine:
            first = next(t for t in targets if t.episode == e)
            target = self.turn_term.splicer.target(samples[e], e, Hint(first.turn, first.hint), "turn")
            held.append(HeldAside(episode_rows(samples[e]), target).state())
        self._held_aside = [HeldAside.from_state(h) for rows in self.ranks.gather_objects(held) for h in rows]
        if self._held_aside:
            start = measure_drift(self.turn_term, self._held_aside)
            if self.global_step == 0 and any(v for kl in start.kl for v in kl):
                raise ConfigError(
                    "the drift matrix measures against the policy with its adapters off, which is the "
                    "start only when the adapter starts at zero; this one does not (drift_episodes: 0)"
                )
            self._write_drift(start, rolled_back=False)
        return [t for t in targets if t.episode not in set(mine)]

    def _matrix_check(self, snapshot: dict | None) -> dict[str, float]:
        """This step's drift matrix, logged and written; the check reads its off-target cell (all-reduced: the same
        value, and so the same decision, on every rank). Every rank must call it."""
        matrix = measure_drift(self.turn_term, self._held_aside)
        logged = matrix.logged()
        off = logged.get("drift/off_target")
        off = None if off is None else self.ranks.sum(off) / self.ranks.size
        out = {**logged, **self._verdict(off, snapshot)}
        self._write_drift(matrix, rolled_back=bool(out.get("distill/rolled_back")))
        return out

    def _write_drift(self, matrix: DriftMatrix, rolled_back: bool) -> None:
        """One line of ``turn_drift.jsonl`` in the run folder (``trainer.default_root_dir``), from rank 0."""
        if self.global_rank != 0 or self._trainer is None:
            return
        path = Path(self.trainer.default_root_dir) / "turn_drift.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            f.write(json.dumps(matrix.record(self.global_step, rolled_back=rolled_back)) + "\n")

    def _drift_rows(self, samples, targets: list[TurnTarget]) -> list[Row]:
        """This rank's share of the turns this step's drift is measured on (``drift_set``): the targeted episodes'
        turns that were not targeted, or the held-out set, fixed at the first step from the episodes that got no
        target. Either is the global batch's first ``drift_rows`` (ranks in order); the held-out set is gathered so
        that every rank holds all of it (and measures every ``world_size``-th row). Every rank must call it."""
        if self.hparams.drift_set == "held_out" and not self._held_out:
            hit = {t.episode for t in targets}
            untargeted = [i for i, s in enumerate(samples) if i not in hit and s.infra_error is None]
            mine = self._turn_rows(samples, untargeted)
            self._held_out = [row for rows in self.ranks.gather_objects(mine) for row in rows][
                : self.hparams.drift_rows
            ]
        if self.hparams.drift_set == "held_out" and self._held_out:
            return self._held_out[self.global_rank :: self.ranks.size]
        targeted = sorted({t.episode for t in targets})
        rows = self._turn_rows(samples, targeted, skip={(t.episode, k) for t in targets for k in t.covered})
        return rows[: self.ranks.prefix(len(rows), self.hparams.drift_rows)]

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        super().on_save_checkpoint(checkpoint)
        self.turn_term.save(checkpoint)
        checkpoint["distill_held_out"] = [[list(ids), n] for ids, n in self._held_out]
        checkpoint["distill_held_aside"] = [h.state() for h in self._held_aside]

    def on_load_checkpoint(self, checkpoint: dict) -> None:
        super().on_load_checkpoint(checkpoint)
        self.turn_term.load(checkpoint)
        self._held_out = [(list(ids), int(n)) for ids, n in checkpoint.get("distill_held_out", [])]
        self._held_aside = [HeldAside.from_state(h) for h in checkpoint.get("distill_held_aside", [])]

    def _turn_rows(self, samples, episodes: list[int], skip: frozenset | set = frozenset()) -> list[Row]:
        """Up to ``drift_rows`` assistant turns of ``episodes`` (``(episode, turn)`` pairs in ``skip`` left out), as
        (ids ending with the turn, the turn's length)."""
        rows = []
        for episode in episodes:
            for k in range(sum(t.trainable for t in samples[episode].all_turns)):
                if (episode, k) in skip or len(rows) == self.hparams.drift_rows:
                    continue
                prefix, ids = turn_context(samples[episode], k, episode)
                if ids:
                    rows.append((prefix + ids, len(ids)))
        return rows

    def _logits(self, rows: list[Row]) -> torch.Tensor:
        with self.eval_mode(), torch.no_grad():
            return self.turn_term.turn_logits([ids for ids, _ in rows], [n for _, n in rows], "student").cpu()

    def _snapshot(self) -> dict:
        """What a rollback restores: the adapter weights, the optimizer state and the EMA teacher's weights."""
        trainable = {k: v.detach().clone() for k, v in self.policy.named_parameters() if v.requires_grad}
        ema = self.turn_term.ema
        return {
            "params": trainable,
            "optimizer": copy.deepcopy(self.optimizers().optimizer.state_dict()),
            "ema": None if ema is None else {k: v.clone() for k, v in ema.items()},
        }

    def _drift(self, rows: list[Row], before: torch.Tensor | None, snapshot: dict | None) -> dict[str, float]:
        """The step's change: KL(before || after) per token on the non-target turns of every rank (a global mean:
        the same number, and so the same decision, on every rank), checked against ``max_drift``. Every rank must
        call it, with or without rows of its own."""
        total, count = 0.0, 0.0
        if rows:
            after = self._logits(rows)
            mask = self.turn_term.mask([n for _, n in rows]).cpu()
            kl = token_divergence(after, before, DivergenceSpec("forward_kl"))
            total, count = float((kl * mask).sum()), float(mask.sum())
        drift = self.ranks.sum(total) / max(self.ranks.sum(count), 1.0)
        return {"distill/drift": drift, **self._verdict(drift, snapshot)}

    def _verdict(self, drift: float | None, snapshot: dict | None) -> dict[str, float]:
        """Marks (and with ``rollback`` undoes) a step whose drift (nats per token) is past ``max_drift``."""
        unstable = self.hparams.max_drift is not None and drift is not None and drift > self.hparams.max_drift
        out = {"distill/unstable": float(unstable)}
        if unstable and snapshot is not None:
            with torch.no_grad():
                for name, param in self.policy.named_parameters():
                    if name in snapshot["params"]:
                        param.copy_(snapshot["params"][name])
            self.optimizers().optimizer.load_state_dict(snapshot["optimizer"])
            self.turn_term.ema = snapshot["ema"]
            self.engine_synced_at = -1  # the engine holds the undone weights: ship the restored ones next step
            out["distill/rolled_back"] = 1.0
        return out

    def _optimize(self, targets: list[TurnTarget], samples) -> dict[str, float]:
        """One optimizer step on the turn term alone (``step_on_terms``): this rank's targets and anchor rows (none:
        it joins the all-reduce), over the step's divisors from every rank's counts and times the world size; the
        statistics are this rank's share of the global means."""
        self.turn_loss.use(samples, targets)
        totals = self.step_on_terms([self.turn_loss])
        if not all(math.isfinite(v) for v in totals.values()):
            raise FloatingPointError(f"non-finite distillation statistics: {totals}")
        return totals
