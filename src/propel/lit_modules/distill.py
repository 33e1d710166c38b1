"""Turn-targeted KL distillation: pull the policy toward itself-with-a-hint on one turn of an agent episode.

Each step runs the datamodule's episodes with the current policy (``EpisodeDataModule``), asks a ``HintSource``
which turns went wrong and what would have helped, and builds for each target the student's exact context up to
turn t and the teacher's, the same ids with the hint spliced in as a message before turn t
(``propel.rollouts.hints``). The loss is a divergence between the two next-token distributions on turn t's own
tokens only (``propel.losses.distillation``), so the turns around it get no gradient. The teacher is the live
policy (self-distillation with privileged context), the base model (adapters off) or another model sharing the
tokenizer; it never gets a gradient. Both forwards run with dropout off; an empty hint makes no target at all.
A wrong-hint control (the same divergence with an unrelated hint) is logged next to the real one, so a user can see
how much of the pull is the hint's.

On-policy (``on_policy=True``), the student first regenerates turn t from its own hint-free prefix through the
rollout engine and the loss is taken on those fresh tokens (with ``reverse_kl`` this is on-policy distillation),
each token weighted by the truncated importance ratio policy/engine when the engine is not the policy (vLLM).
Guards against the teacher-student shift (seed 002, pitfall 4): hints can be phased in (``hint_share`` grows the
share of targets used over the run), and each update's drift -- KL(before || after) per token on the step's
assistant turns that were not targeted -- is logged; past ``max_drift`` the step is marked unstable and, with
``rollback``, undone (adapter weights and optimizer state restored).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import replace

import torch

from propel.errors import ConfigError
from propel.lit_modules.policy import LoRAPolicyModule
from propel.lit_modules.state import RolloutState
from propel.losses.distillation import DivergenceSpec, masked_mean, token_divergence
from propel.losses.logprobs import token_logprobs
from propel.losses.policy import truncated_importance_weights
from propel.models.reference import reference_forward
from propel.models.span_logits import span_logits
from propel.rollouts.episode_stats import episode_stats
from propel.rollouts.hints import HintSource, HintSplicer, TurnTarget, turn_context
from propel.rollouts.steps import ContextBatch

TEACHERS = ("live", "base", "external")
Row = tuple[list[int], int]
"""Token ids ending with an assistant turn, and that turn's length (a turn the drift is measured on)."""


class TurnKLDistillModule(LoRAPolicyModule):
    """Turn-targeted KL distillation of a LoRA policy on its own agent episodes.

    Args:
        hints: which turns to target and with what (``propel.rollouts.hints.ErrorHints``, ``StaticHints``, ...).
        divergence: ``forward_kl`` / ``reverse_kl`` / ``jsd`` (beta), full vocabulary or teacher top-k, clipping.
        teacher: ``live`` (the policy under no-grad), ``base`` (the policy with its adapters disabled) or
            ``external`` (``teacher_model``, which must share the tokenizer).
        teacher_model: the external teacher (bundled alias, folder or hub id).
        kl_coefficient: the loss's scale (the divergence is logged unscaled).
        temperature_schedule: softmax temperatures of both distributions, stepped evenly over ``max_steps``.
        max_target_turns_per_rollout: at most this many targeted turns per episode (the first ones named).
        episodes_per_context: episodes rolled out per task each step.
        hint_role: the hint message's role (``system`` or ``user``).
        hint_template: the hint message text (``{hint}`` is the hint).
        control_hint: an unrelated hint whose divergence is logged as the control (None: no control).
        max_steps_without_targets: steps in a row that find nothing to target before the run stops with an error
            (no optimizer step is taken without targets, so the step count would never reach ``max_steps``).
        on_policy: regenerate turn t with the student and take the loss on its own tokens (see the module docstring).
        importance_cap: truncation of the on-policy importance ratio (vLLM engines).
        hint_share: share of the named targets used, from the first step to the last (linear): ``[0.25, 1.0]``
            phases hints in; ``[1.0, 1.0]`` uses all from the start.
        max_drift: per-token KL(before || after) on non-target turns above which a step counts as unstable.
        rollback: undo unstable steps.
        drift_rows: non-target turns measured per step for the drift (0: none).
        **kwargs: the policy's settings (``LoRAPolicyModule``: model, lora, sampling, lr, gradient_clip_val, ...).
    """

    def __init__(
        self,
        hints: HintSource,
        divergence: DivergenceSpec | None = None,
        teacher: str = "live",
        teacher_model: str | None = None,
        kl_coefficient: float = 0.05,
        temperature_schedule: Sequence[float] = (1.0, 0.8, 0.6),
        max_target_turns_per_rollout: int = 3,
        episodes_per_context: int = 2,
        hint_role: str = "system",
        hint_template: str = "Hint: {hint}",
        control_hint: str | None = "Take a deep breath and read the task again.",
        max_steps_without_targets: int = 20,
        on_policy: bool = False,
        importance_cap: float = 3.0,
        hint_share: Sequence[float] = (1.0, 1.0),
        max_drift: float | None = None,
        rollback: bool = False,
        drift_rows: int = 8,
        **kwargs,
    ) -> None:
        if teacher not in TEACHERS:
            raise ConfigError(f"teacher must be one of {TEACHERS}, got {teacher!r}")
        if (teacher == "external") != (teacher_model is not None):
            raise ConfigError("teacher_model is needed with teacher='external', and only then")
        if not temperature_schedule or any(not t > 0 for t in temperature_schedule):
            raise ConfigError(f"temperature_schedule needs positive temperatures, got {list(temperature_schedule)}")
        for name, value in (("max_target_turns_per_rollout", max_target_turns_per_rollout),
                            ("episodes_per_context", episodes_per_context),
                            ("max_steps_without_targets", max_steps_without_targets)):  # fmt: skip
            if value < 1:
                raise ConfigError(f"{name} must be >= 1, got {value}")
        if not kl_coefficient > 0:
            raise ConfigError(f"kl_coefficient must be > 0, got {kl_coefficient}")
        if len(hint_share) != 2 or not all(0.0 < x <= 1.0 for x in hint_share):
            raise ConfigError(f"hint_share must be [start, end] with each in (0, 1], got {list(hint_share)}")
        if rollback and max_drift is None:
            raise ConfigError("rollback needs max_drift (the drift above which a step is undone)")
        if drift_rows < 0:
            raise ConfigError(f"drift_rows must be >= 0, got {drift_rows}")
        super().__init__(**kwargs)
        self.hints = hints
        self.divergence = divergence or DivergenceSpec()
        self.sampling.n = episodes_per_context
        self.teacher_model = None
        self._empty_steps = 0

    def setup_policy(self) -> None:
        self.splicer = HintSplicer(self.tokenizer, self.hparams.hint_role, self.hparams.hint_template)
        if self.hparams.teacher == "external":
            from propel.models import load_model

            model, tokenizer = load_model(self.hparams.teacher_model, dtype=self.hparams.dtype)
            if tokenizer.get_vocab() != self.tokenizer.get_vocab():
                raise ConfigError(f"teacher_model {self.hparams.teacher_model!r} does not share the policy's tokenizer")
            self.teacher_model = model.to(self.device).eval().requires_grad_(False)

    def _progress(self) -> float | None:
        """``global_step / max_steps`` in [0, 1), or None without a step budget."""
        total = getattr(self.trainer, "max_steps", -1) if self._trainer is not None else -1
        return None if total is None or total < 1 else min(self.global_step / total, 1.0)

    def temperature(self) -> float:
        """The schedule's temperature at this step (evenly spaced stages over ``max_steps``)."""
        schedule, progress = list(self.hparams.temperature_schedule), self._progress()
        return schedule[0] if progress is None else schedule[min(len(schedule) - 1, int(progress * len(schedule)))]

    def hint_fraction(self) -> float:
        """The share of named targets used at this step (``hint_share``, linear over the run)."""
        start, end = self.hparams.hint_share
        progress = self._progress()
        return end if progress is None else start + (end - start) * progress

    # ---------------------------------------------------------------------------------------------- targets
    def targets(self, samples) -> list[TurnTarget]:
        out = []
        for i, sample in enumerate(samples):
            if sample.infra_error is not None:
                continue
            named = self.hints.hints(sample)[: self.hparams.max_target_turns_per_rollout]
            # an empty hint leaves the teacher's context the student's: nothing to learn, so no loss term at all
            out += [self.splicer.target(sample, i, hint) for hint in named if hint.text]
        return out

    # ----------------------------------------------------------------------------------------------- logits
    def _turn_logits(self, rows: list[list[int]], lengths: list[int], which: str) -> torch.Tensor:
        """``(B, T, V)`` logits predicting each row's last ``lengths[b]`` tokens (left-aligned in T), from the
        student (the policy) or the teacher (the live policy, the policy with adapters off, or the external model)."""
        pad = self.tokenizer.pad_token_id or 0
        width = max(map(len, rows))
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for b, r in enumerate(rows):
            ids[b, : len(r)], attn[b, : len(r)] = torch.tensor(r), 1
        starts = torch.tensor([len(r) - n for r, n in zip(rows, lengths, strict=True)])
        model, ctx = self.policy, nullcontext()
        if which == "teacher" and self.hparams.teacher == "external":
            model = self.teacher_model
        elif which == "teacher" and self.hparams.teacher == "base":
            ctx = reference_forward(self.policy)
        with ctx:
            return span_logits(model, ids.to(self.device), attn.to(self.device), starts, max(lengths))

    def _mask(self, lengths: list[int]) -> torch.Tensor:
        t = max(lengths)
        return (torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]).float().to(self.device)

    # ---------------------------------------------------------------------------------------------- step
    def training_step(self, batch: ContextBatch, batch_idx: int) -> None:
        rollout = self.collect_rollout(batch)
        samples = rollout.samples
        self.rollout_state = RolloutState(step=self.global_step, samples=samples, rewards=None)
        targets = self.targets(samples)
        stats = {
            **episode_stats(samples),
            **{f"time/{k}": v for k, v in rollout.timings.items()},
            "distill/targets": float(len(targets)),
            "distill/target_tokens": float(sum(t.length for t in targets)),
            "distill/temperature": self.temperature(),
        }
        targets = targets[: math.ceil(self.hint_fraction() * len(targets))]
        if self.hparams.on_policy and targets:
            targets = self._regenerate(targets)
        targets = [t for t in targets if t.length > 0]
        stats["distill/targets_used"] = float(len(targets))
        if not targets:
            self._empty_steps += 1
            self.log_dict({f"train/{k}": v for k, v in stats.items()}, on_step=True, batch_size=len(samples))
            if self._empty_steps >= self.hparams.max_steps_without_targets:
                raise RuntimeError(
                    f"{self._empty_steps} steps in a row found no turn to target: the hint source names none for "
                    "these episodes (solved, or no errors); check `hints`, or raise max_steps_without_targets"
                )
            return
        self._empty_steps = 0
        drift_rows = self._non_target_rows(samples, targets)
        before = self._logits(drift_rows) if drift_rows else None
        snapshot = self._snapshot() if self.hparams.rollback else None
        stats.update(self._optimize(targets))
        if before is not None:
            stats.update(self._drift(drift_rows, before, snapshot))
        self.log("train/loss", stats.pop("loss"), on_step=True, prog_bar=True, batch_size=len(targets))
        self.log_dict({f"train/{k}": v for k, v in stats.items()}, on_step=True, batch_size=len(targets))

    def _regenerate(self, targets: list[TurnTarget]) -> list[TurnTarget]:
        """On-policy: turn t sampled afresh by the student (the rollout engine) from its own hint-free prefix."""
        from propel.engines.base import Prompt

        self.sync_engine()
        prompts = [Prompt(token_ids=t.student_ids[: len(t.student_ids) - t.length]) for t in targets]
        groups = self.engine.generate(prompts, replace(self.sampling, n=1))
        return [t.regenerated(g[0].token_ids, g[0].logprobs) for t, g in zip(targets, groups, strict=True)]

    # ------------------------------------------------------------------------------------------------ drift
    def _non_target_rows(self, samples, targets: list[TurnTarget]) -> list[Row]:
        """Up to ``drift_rows`` assistant turns of the targeted episodes that are not themselves targeted, as
        (ids ending with the turn, the turn's length)."""
        hit = {(t.episode, t.turn) for t in targets}
        rows = []
        for episode in sorted({t.episode for t in targets}):
            for k in range(sum(t.trainable for t in samples[episode].all_turns)):
                if (episode, k) in hit or len(rows) == self.hparams.drift_rows:
                    continue
                prefix, ids = turn_context(samples[episode], k, episode)
                if ids:
                    rows.append((prefix + ids, len(ids)))
        return rows

    def _logits(self, rows: list[Row]) -> torch.Tensor:
        with self.eval_mode(), torch.no_grad():
            return self._turn_logits([ids for ids, _ in rows], [n for _, n in rows], "student").cpu()

    def _snapshot(self) -> dict:
        trainable = {k: v.detach().clone() for k, v in self.policy.named_parameters() if v.requires_grad}
        return {"params": trainable, "optimizer": copy.deepcopy(self.optimizers().optimizer.state_dict())}

    def _drift(self, rows: list[Row], before: torch.Tensor, snapshot: dict | None) -> dict[str, float]:
        """KL(before || after) per token on the non-target turns; marks (and with ``rollback`` undoes) a step
        past ``max_drift``."""
        after = self._logits(rows)
        mask = self._mask([n for _, n in rows]).cpu()
        drift = float(masked_mean(token_divergence(after, before, DivergenceSpec("forward_kl")), mask))
        unstable = self.hparams.max_drift is not None and drift > self.hparams.max_drift
        out = {"distill/drift": drift, "distill/unstable": float(unstable)}
        if unstable and snapshot is not None:
            with torch.no_grad():
                for name, param in self.policy.named_parameters():
                    if name in snapshot["params"]:
                        param.copy_(snapshot["params"][name])
            self.optimizers().optimizer.load_state_dict(snapshot["optimizer"])
            self._engine_synced_at = -1  # the engine holds the undone weights
            out["distill/rolled_back"] = 1.0
        return out

    def _importance(self, group: list[TurnTarget], student: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
        """Per-token ``min(exp(policy_logp - engine_logp), cap)`` for on-policy tokens an engine other than the
        policy sampled (vLLM); None when no correction applies."""
        if not self.hparams.on_policy or self.engine_is_policy() or any(t.engine_logprobs is None for t in group):
            return None
        t_max = student.shape[1]
        tokens = torch.tensor(
            [t.student_ids[-t.length :] + [0] * (t_max - t.length) for t in group], device=self.device
        )
        engine = torch.tensor([list(t.engine_logprobs) + [0.0] * (t_max - t.length) for t in group], device=self.device)
        logp, _ = token_logprobs(student.detach(), tokens, temperature=self.sampling.temperature or 1.0,
                                 top_k=self.sampling.top_k, top_p=self.sampling.top_p)  # fmt: skip
        return truncated_importance_weights(logp, engine, cap=self.hparams.importance_cap, mask=mask)

    def _optimize(self, targets: list[TurnTarget]) -> dict[str, float]:
        spec, temp, coef = self.divergence, self.temperature(), self.hparams.kl_coefficient
        n_tok = float(sum(t.length for t in targets))
        control = self.hparams.control_hint

        def micro_loss(rows: torch.Tensor) -> tuple[torch.Tensor, dict[str, float]]:
            group = [targets[i] for i in rows.tolist()]
            lengths = [t.length for t in group]
            mask = self._mask(lengths)
            with self.eval_mode():
                with torch.no_grad():
                    teacher = self._turn_logits([t.teacher_ids for t in group], lengths, "teacher")
                    if control:
                        wrong = [self.splicer.splice(t.student_ids[: -t.length], control) + t.student_ids[-t.length :]
                                 for t in group]  # fmt: skip
                        ctrl = self._turn_logits(wrong, lengths, "teacher")
                student = self._turn_logits([t.student_ids for t in group], lengths, "student")
            div = token_divergence(student, teacher, spec, temp)
            weights = self._importance(group, student, mask)
            if weights is not None:
                div = div * weights
            loss = coef * masked_mean(div, mask, n_tok)
            out = {"distill/divergence": float(masked_mean(div.detach(), mask, n_tok))}
            if control:
                out["distill/control_divergence"] = float(
                    masked_mean(token_divergence(student.detach(), ctrl, spec, temp), mask, n_tok)
                )
            return loss, out

        totals = self.optimization_step(len(targets), micro_loss)
        if not all(math.isfinite(v) for v in totals.values()):
            raise FloatingPointError(f"non-finite distillation statistics: {totals}")
        return totals
