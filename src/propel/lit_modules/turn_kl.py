"""The turn-targeted KL term, shared by the distillation trainer and GRPO with a turn-KL term.

A ``HintSource`` names turns of finished episodes to correct; for each, the student's exact context up to turn t
and the teacher's (the same ids with the hint spliced in as a message before turn t) are scored on turn t's own
tokens only, and the loss is ``kl_coefficient`` times the mean per-token divergence (``propel.losses.distillation``).
The teacher never gets a gradient: it is the live policy under no-grad, the policy with its adapters disabled
(``base``), an exponential moving average of the adapter weights (``ema``, swapped into the adapter for the
teacher's forward pass; no second copy of the base model) or another model sharing the tokenizer (``external``).
Both forwards run with dropout off. A wrong-hint control (the same divergence with an unrelated hint) is logged next
to the real one.

Data-parallel (``trainer.strategy: ddp``): each rank names targets on its own episodes; the term is normalised by
the global target token count and multiplied by the world size (DDP averages gradients), so the update is the one a
single process would take on the global batch. A rank without targets in a step where another has some logs the
term's statistics as 0 (every logged key is an all-reduce, so every rank logs the same keys in the same order).
The EMA teacher is updated after every optimizer step, on every rank (its time constant is in optimizer steps,
whether or not a step had targets).

Importance weights (an engine that is not the policy) are per target: a target whose turn has no engine logprobs
gets weight 1 on its tokens, and the other targets of its micro-batch keep their correction.

``scope: sequence`` takes the same divergence over every assistant token from turn t on (the whole-sequence
baseline): the experiment ``experiments/turn_kl_scope/run.py`` measures what the turn scope buys in drift.

Locality guards, each off by default (the term is then today's, bit for bit): ``anchor_weight`` adds a KL to the
start (the policy with its adapters off: the adapter starts at zero, so that is the step-0 policy, with no copy to
keep or checkpoint) on the targeted episodes' other assistant turns, before and after t, in the term's divergence
and temperature; ``proximal`` replaces the divergence on turn t by the seed's clipped update
(``propel.losses.proximal_distillation``). ``normalisation`` names what the token sums are divided by
(``propel.losses.turn_normalisation``): today's ``per_target_token`` makes a turn-only arm step harder on turn t
than an arm that also reads the later turns; ``per_episode_token`` and ``constant`` do not.

``TurnKLTerm`` is a collaborator of the LoRA policy module it trains, not a base class of it: it reads what
``LoRAPolicyModule`` declares (``policy``, ``tokenizer``, ``device``, ``ranks``, ``sampling``, ``eval_mode``,
``engine_is_policy``, ``progress``) and the trainer's ``turn_kl`` (a ``TurnKLSpec``), ``hints`` and
``importance_cap``, where the trainer keeps them.
Both trainers step on it through one loss term (``propel.lit_modules.turn_kl_loss.TurnKLLoss``): GRPO beside its
clipped policy loss, the distillation trainer alone.
"""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from propel.errors import ConfigError
from propel.losses.distillation import DivergenceSpec, masked_mean, token_divergence
from propel.losses.logprobs import token_logprobs
from propel.losses.policy_gradient import truncated_importance_weights
from propel.losses.proximal_distillation import distillation_advantage, proximal_distillation
from propel.losses.turn_normalisation import NORMALISATIONS, TurnNorm
from propel.models.reference import reference_forward
from propel.models.span_logits import span_logits
from propel.records import Sample
from propel.rollouts.episode_rows import episode_rows
from propel.rollouts.hints import HintSplicer, TurnTarget

TEACHERS = ("live", "base", "ema", "external")
SCOPES = ("turn", "sequence")
EMA_KEY = "turn_kl_ema"
"""Checkpoint entry holding the EMA teacher's adapter weights (a resumed run continues the same average)."""


@dataclass
class TurnKLSpec:
    """The turn-targeted KL term's settings: one object both trainers take (``turn_kl:`` in YAML), so the term reads
    the same values whichever trainer it is in."""

    divergence: DivergenceSpec = field(default_factory=DivergenceSpec)
    """Which divergence over turn t's tokens (``propel.losses.distillation.DivergenceSpec``)."""
    scope: str = "turn"
    """``turn``: the divergence on turn t's tokens only (the turn-targeted term). ``sequence``: on every assistant
    token from turn t to the episode's last turn, the teacher's context holding the same hint before turn t (the
    whole-sequence baseline the targeted term is measured against; observations are not read)."""
    teacher: str = "live"
    """``live`` (the policy under no-grad), ``base`` (adapters disabled), ``ema`` (an average of the adapter's
    weights) or ``external`` (``teacher_model``, sharing the tokenizer)."""
    teacher_model: str | None = None
    """The external teacher (alias, folder or hub id), with ``teacher: external`` only."""
    kl_coefficient: float = 0.05
    """Weight of the term: ``kl_coefficient`` times the mean per-token divergence."""
    temperature_schedule: tuple[float, ...] = (1.0, 0.8, 0.6)
    """Softmax temperatures of both distributions, in evenly spaced stages over ``max_steps``."""
    max_target_turns_per_rollout: int = 3
    """At most this many hinted turns per episode."""
    hint_role: str = "system"
    """The role of the hint message spliced in before turn t."""
    hint_template: str = "Hint: {hint}"
    """The hint message's text (``{hint}``: the hint source's text)."""
    control_hint: str | None = "Take a deep breath and read the task again."
    """An unrelated hint whose divergence is logged next to the real one (None: no control)."""
    ema_decay: float = 0.99
    """The EMA teacher's weight on the old average per optimizer step."""
    normalisation: str = "per_target_token"
    """What the token sums are divided by (``propel.losses.turn_normalisation``): ``per_target_token`` (the mean over
    the tokens the term reads: a turn-only arm puts more weight on turn t than an arm reading t to the end),
    ``per_episode_token`` (over the targeted episodes' assistant tokens) or ``constant`` (over
    ``normalisation_constant`` tokens per targeted episode)."""
    normalisation_constant: float | None = None
    """Tokens per episode for ``normalisation: constant`` (e.g. ``max_new_tokens`` times the turns per episode)."""
    anchor_weight: float = 0.0
    """Weight, relative to the turn term, of a KL to the start (adapters off) on the targeted episodes' other
    assistant turns, before and after t, in the term's divergence (the start as the teacher) and temperature
    (0: no anchor, today's loss bit for bit)."""
    proximal: bool = False
    """The seed's proximal variant on the target turn: ``-min(r A, clip(r) A)`` per sampled token, ``r`` the current
    policy's probability over the rollout's, ``A`` the teacher-student log-ratio, in place of the divergence (which
    is still logged). The ratio replaces the importance weights of an engine that is not the policy."""
    proximal_clip: float = 0.2
    """The proximal variant's clip range: ``r`` is clipped to ``[1 - proximal_clip, 1 + proximal_clip]``."""

    def __post_init__(self) -> None:
        if isinstance(self.divergence, dict):
            self.divergence = DivergenceSpec(**self.divergence)
        self.temperature_schedule = tuple(float(t) for t in self.temperature_schedule)
        if self.scope not in SCOPES:
            raise ConfigError(f"scope must be one of {SCOPES}, got {self.scope!r}")
        if self.teacher not in TEACHERS:
            raise ConfigError(f"teacher must be one of {TEACHERS}, got {self.teacher!r}")
        if (self.teacher == "external") != (self.teacher_model is not None):
            raise ConfigError("teacher_model is needed with teacher='external', and only then")
        schedule = list(self.temperature_schedule)
        if not schedule or any(not t > 0 for t in schedule):
            raise ConfigError(f"temperature_schedule needs positive temperatures, got {schedule}")
        if self.max_target_turns_per_rollout < 1:
            raise ConfigError(f"max_target_turns_per_rollout must be >= 1, got {self.max_target_turns_per_rollout}")
        if not self.kl_coefficient > 0:
            raise ConfigError(f"kl_coefficient must be > 0, got {self.kl_coefficient}")
        if not 0.0 <= self.ema_decay < 1.0:
            raise ConfigError(f"ema_decay must be in [0, 1), got {self.ema_decay}")
        if self.normalisation not in NORMALISATIONS:
            raise ConfigError(f"normalisation must be one of {NORMALISATIONS}, got {self.normalisation!r}")
        if (self.normalisation == "constant") != (self.normalisation_constant is not None):
            raise ConfigError("normalisation_constant (tokens per episode) is needed with normalisation='constant', "
                              "and only then")  # fmt: skip
        if self.normalisation_constant is not None and not self.normalisation_constant > 0:
            raise ConfigError(f"normalisation_constant must be > 0, got {self.normalisation_constant}")
        if not self.anchor_weight >= 0:
            raise ConfigError(f"anchor_weight must be >= 0, got {self.anchor_weight}")
        if not 0.0 < self.proximal_clip < 1.0:
            raise ConfigError(f"proximal_clip must be in (0, 1), got {self.proximal_clip}")


@dataclass
class AnchorRow:
    """The anchor's share of one targeted episode (one row per step-wise segment): its ids up to the last assistant
    token the anchor reads, and which of the trailing ``length`` tokens it reads (the assistant turns no target of
    the episode covers)."""

    episode: int
    ids: list[int]
    length: int
    mask: list[int]

    @property
    def scored(self) -> int:
        return sum(self.mask)


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


class TurnKLTerm:
    """The term, a collaborator of the LoRA policy module it trains (``owner``): targets, teacher and student logits
    on turn t, the micro-batch loss, and the EMA teacher's weights. It reads what ``LoRAPolicyModule`` declares
    (``policy``, ``tokenizer``, ``device``, ``ranks``, ``sampling``, ``eval_mode``, ``engine_is_policy``,
    ``progress``) and the trainer's own ``turn_kl`` (a ``TurnKLSpec``), ``hints`` and ``importance_cap``, each where
    the trainer keeps it, so a spec or hint source set on the trainer later is the one the term uses; the owner hands
    it its checkpoint (``save``, ``load``)."""

    def __init__(self, owner) -> None:
        self.owner = owner
        self.splicer: HintSplicer | None = None
        """Splices a hint into a context (after ``setup``: it needs the tokenizer)."""
        self.teacher_model: torch.nn.Module | None = None
        """The external teacher (``teacher: external``), after ``setup``."""
        self.ema: dict[str, torch.Tensor] | None = None
        """The EMA teacher's adapter weights (``teacher: ema``), after ``setup`` or ``load``."""

    # the owner's parts the term reads
    @property
    def spec(self) -> TurnKLSpec:
        return self.owner.turn_kl

    @property
    def hints(self):
        return self.owner.hints

    @property
    def importance_cap(self) -> float:
        return self.owner.hparams.importance_cap

    @property
    def policy(self):
        return self.owner.policy

    @property
    def tokenizer(self):
        return self.owner.tokenizer

    @property
    def device(self) -> torch.device:
        return self.owner.device

    @property
    def ranks(self):
        return self.owner.ranks

    @property
    def sampling(self):
        return self.owner.sampling

    def eval_mode(self):
        return self.owner.eval_mode()

    def setup(self, dtype: str | None) -> None:
        """After the policy exists: the hint splicer, the external teacher (loaded in ``dtype``, the policy's), the
        EMA's starting weights."""
        self.splicer = HintSplicer(self.tokenizer, self.spec.hint_role, self.spec.hint_template)
        if self.spec.teacher == "external" and self.teacher_model is None:
            from propel.models import load_model

            model, tokenizer = load_model(self.spec.teacher_model, dtype=dtype)
            if tokenizer.get_vocab() != self.tokenizer.get_vocab():
                raise ConfigError(f"teacher_model {self.spec.teacher_model!r} does not share the policy's tokenizer")
            self.teacher_model = model.eval().requires_grad_(False)
        if self.spec.teacher == "ema" and self.ema is None:
            self.ema = {k: v.detach().clone() for k, v in self._adapter_params().items()}

    # ------------------------------------------------------------------------------------------- schedule
    def temperature(self) -> float:
        """The schedule's temperature at this step (evenly spaced stages over ``max_steps``)."""
        schedule, progress = list(self.spec.temperature_schedule), self.owner.progress()
        return schedule[0] if progress is None else schedule[min(len(schedule) - 1, int(progress * len(schedule)))]

    # -------------------------------------------------------------------------------------------- targets
    def targets(self, samples) -> list[TurnTarget]:
        """At most ``max_target_turns_per_rollout`` targets per episode, from the hint source; an empty hint leaves
        the teacher's context the student's (nothing to learn), so it makes no target at all."""
        out = []
        for i, sample in enumerate(samples):
            if sample.infra_error is not None:
                continue
            named = self.hints.hints(sample)[: self.spec.max_target_turns_per_rollout]
            made = [self.splicer.target(sample, i, hint, self.spec.scope) for hint in named if hint.text]
            if self.spec.proximal:  # the clipped ratio reads the rollout's own logprobs of the turn
                made = [replace(t, engine_logprobs=turn_engine_logprobs(sample, t)) for t in made]
            out += made
        return out

    def anchor_rows(self, samples: list[Sample], targets: list[TurnTarget]) -> list[AnchorRow]:
        """The anchor's rows: every targeted episode's assistant turns that none of its targets covers (none when
        ``anchor_weight`` is 0)."""
        if not self.spec.anchor_weight:
            return []
        covered: dict[int, set[int]] = {}
        for t in targets:
            covered.setdefault(t.episode, set()).update(t.covered)
        rows = []
        for episode, skip in covered.items():
            for row in episode_rows(samples[episode]):
                mask = [int(k >= 0 and k not in skip) for k in row.turns]
                if not any(mask):
                    continue
                start, end = mask.index(1), len(mask) - mask[::-1].index(1)
                rows.append(AnchorRow(episode, row.ids[:end], end - start, mask[start:end]))
        return rows

    def turn_norm(self, samples: list[Sample], targets: list[TurnTarget], anchors: list[AnchorRow]) -> TurnNorm:
        """The step's divisors (``normalisation``) from every rank's counts; every rank must call it."""
        episodes = {t.episode for t in targets}
        assistant = sum(len(turn.token_ids) for e in episodes for turn in samples[e].all_turns if turn.trainable)
        return TurnNorm.of(
            self.spec.normalisation,
            target_tokens=self.turn_tokens(targets),
            anchor_tokens=self.ranks.sum(float(sum(a.scored for a in anchors))),
            episode_tokens=self.ranks.sum(float(assistant)),
            episodes=self.ranks.sum(float(len(episodes))),
            constant=self.spec.normalisation_constant,
        )

    # --------------------------------------------------------------------------------------------- logits
    def _adapter_params(self) -> dict[str, torch.nn.Parameter]:
        return {k: v for k, v in self.policy.named_parameters() if v.requires_grad}

    @contextmanager
    def _ema_weights(self):
        """The EMA's weights in the adapter for the duration (the teacher's forward pass), then the live ones back."""
        params = self._adapter_params()
        live = {k: v.detach().clone() for k, v in params.items()}
        with torch.no_grad():
            for k, v in params.items():
                v.copy_(self.ema[k])
        try:
            yield
        finally:
            with torch.no_grad():
                for k, v in params.items():
                    v.copy_(live[k])

    def update_ema(self) -> None:
        """After every optimizer step (with or without targets): ``ema = decay * ema + (1 - decay) * live``
        (``decay`` weighs the old average, so 0 makes the EMA the live policy and values near 1 move it slowly)."""
        if self.ema is None:
            return
        decay = self.spec.ema_decay
        with torch.no_grad():
            for k, v in self._adapter_params().items():
                self.ema[k].mul_(decay).add_(v.detach(), alpha=1.0 - decay)

    def turn_logits(self, rows: list[list[int]], lengths: list[int], which: str) -> torch.Tensor:
        """``(B, T, V)`` logits predicting each row's last ``lengths[b]`` tokens (left-aligned in T), from the
        student (the policy) or the teacher."""
        pad = self.tokenizer.pad_token_id or 0
        width = max(map(len, rows))
        ids = torch.full((len(rows), width), pad, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for b, r in enumerate(rows):
            ids[b, : len(r)], attn[b, : len(r)] = torch.tensor(r), 1
        starts = torch.tensor([len(r) - n for r, n in zip(rows, lengths, strict=True)])
        model, ctx, teacher = self.policy, nullcontext(), self.spec.teacher
        if which == "teacher" and teacher == "external":
            model = self.teacher_model.to(self.device)  # a no-op once there (the owner may move after setup)
        elif which == "teacher" and teacher == "base":
            ctx = reference_forward(self.policy)
        elif which == "teacher" and teacher == "ema":
            ctx = self._ema_weights()
        with ctx:
            return span_logits(model, ids.to(self.device), attn.to(self.device), starts, max(lengths))

    def mask(self, lengths: list[int]) -> torch.Tensor:
        t = max(lengths)
        return (torch.arange(t)[None, :] < torch.tensor(lengths)[:, None]).float().to(self.device)

    def target_mask(self, group: list[TurnTarget]) -> torch.Tensor:
        """``(B, T)``: 1 on the tokens the loss reads (a whole-sequence target's observations are 0)."""
        mask = self.mask([t.length for t in group])
        for b, t in enumerate(group):
            if t.mask is not None:
                mask[b, : t.length] = torch.tensor(t.mask, dtype=mask.dtype, device=mask.device)
        return mask

    def importance(self, group: list[TurnTarget], student: torch.Tensor, mask: torch.Tensor) -> torch.Tensor | None:
        """Per-token ``min(exp(policy_logp - engine_logp), cap)`` for tokens an engine other than the policy
        sampled (vLLM); None when no correction applies (the HF engine, or no target with engine logprobs). Per
        sample: a target without engine logprobs gets weight 1 on its tokens, the others keep their correction."""
        if self.owner.engine_is_policy() or all(t.engine_logprobs is None for t in group):
            return None
        t_max = student.shape[1]
        tokens = torch.tensor(
            [t.student_ids[-t.length :] + [0] * (t_max - t.length) for t in group], device=self.device
        )
        nan = float("nan")  # unknown: truncated_importance_weights gives such tokens weight 1
        known = [list(t.engine_logprobs) if t.engine_logprobs is not None else [nan] * t.length for t in group]
        engine = torch.tensor([k + [0.0] * (t_max - len(k)) for k in known], device=self.device)
        logp, _ = token_logprobs(student.detach(), tokens, temperature=self.sampling.temperature or 1.0,
                                 top_k=self.sampling.top_k, top_p=self.sampling.top_p)  # fmt: skip
        return truncated_importance_weights(logp, engine, cap=self.importance_cap, mask=mask)

    # ----------------------------------------------------------------------------------------------- loss
    def turn_stats(self, totals: dict[str, float], *extra: str) -> dict[str, float]:
        """``totals`` with the term's statistics (and ``extra`` keys) present, 0 where this rank had no targets, and
        in one key order on every rank: logged with ``sync_dist`` each key is an all-reduce, paired by order."""
        spec = self.spec
        keys = ["distill/divergence", *(["distill/control_divergence"] if spec.control_hint else []),
                *(["distill/anchor"] if spec.anchor_weight else []),
                *(["distill/advantage", "distill/clipped_fraction"] if spec.proximal else []), *extra]  # fmt: skip
        return dict(sorted({**dict.fromkeys(keys, 0.0), **totals}.items()))

    def named(self, targets: list[TurnTarget], tokens: float | None = None) -> dict[str, float]:
        """What a step's hint source named, as both trainers log it: targets and their tokens on every rank, and the
        schedule's temperature (``tokens``: the targets' tokens when already summed over ranks, as a ``TurnNorm``
        holds them). Every rank must call it."""
        return {
            "distill/targets": self.ranks.sum(len(targets)),
            "distill/target_tokens": self.turn_tokens(targets) if tokens is None else tokens,
            "distill/temperature": self.temperature(),
        }

    def turn_tokens(self, targets: list[TurnTarget]) -> float:
        """Target tokens of the step on every rank; every rank must call it."""
        return self.ranks.sum(float(sum(t.scored for t in targets)))

    def turn_kl_loss(
        self, group: list[TurnTarget | AnchorRow], norm: TurnNorm | float, share: float = 1.0
    ) -> tuple[torch.Tensor, dict[str, float]]:
        """A micro-batch's share of the step's loss, ``kl_coefficient * (turn term + anchor_weight * anchor)``, each
        a token sum over the step's divisor (``norm``: a ``TurnNorm``, or a token count that divides both, as
        ``per_target_token`` does), and its share of the logged means (per token the term or the anchor reads), all
        times ``share`` (the world size under DDP, whose gradient and ``sync_dist`` means divide by it)."""
        if not isinstance(norm, TurnNorm):
            norm = TurnNorm.of("per_target_token", norm, norm)
        targets = [g for g in group if isinstance(g, TurnTarget)]
        anchors = [g for g in group if isinstance(g, AnchorRow)]
        loss, out = self._target_loss(targets, norm, share) if targets else (None, {})
        if anchors:
            anchor, out["distill/anchor"] = self._anchor_loss(anchors, norm, share)
            loss = anchor if loss is None else loss + anchor
        return loss, out

    def _target_loss(self, group: list[TurnTarget], norm: TurnNorm, share: float):
        """The turn term's part: the divergence on the targets' tokens (importance-weighted for an engine that is
        not the policy), or with ``proximal`` the clipped update; the logged divergences either way."""
        spec, temp, control = self.spec.divergence, self.temperature(), self.spec.control_hint
        lengths = [t.length for t in group]
        mask = self.target_mask(group)
        with self.eval_mode():
            with torch.no_grad():
                teacher = self.turn_logits([t.teacher_ids for t in group], lengths, "teacher")
                if control:
                    wrong = [self.splicer.splice(t.student_ids[: -t.length], control) + t.student_ids[-t.length :]
                             for t in group]  # fmt: skip
                    ctrl = self.turn_logits(wrong, lengths, "teacher")
            student = self.turn_logits([t.student_ids for t in group], lengths, "student")
        div = token_divergence(student, teacher, spec, temp)
        out = {}
        if self.spec.proximal:
            per_token, clipped, adv = self._proximal(group, student, teacher, mask, temp)
            loss = share * self.spec.kl_coefficient * masked_mean(per_token, mask, norm.target)
            out["distill/advantage"] = share * float(masked_mean(adv, mask, norm.target_tokens))
            out["distill/clipped_fraction"] = share * float(masked_mean(clipped.float(), mask, norm.target_tokens))
        else:
            weights = self.importance(group, student, mask)
            if weights is not None:
                div = div * weights
            loss = share * self.spec.kl_coefficient * masked_mean(div, mask, norm.target)
        out["distill/divergence"] = share * float(masked_mean(div.detach(), mask, norm.target_tokens))
        if control:
            out["distill/control_divergence"] = share * float(
                masked_mean(token_divergence(student.detach(), ctrl, spec, temp), mask, norm.target_tokens)
            )
        return loss, out

    def _proximal(self, group: list[TurnTarget], student, teacher, mask, temp: float):
        """Per token: the clipped surrogate, where the clip binds, and the advantage (teacher minus student
        log-probability of the sampled token at the term's temperature); the ratio is taken under the sampler's
        warping, against the rollout's logprobs (the current policy's own where the rollout has none: ratio 1)."""
        t_max = student.shape[1]
        tokens = torch.tensor([t.student_ids[-t.length :] + [0] * (t_max - t.length) for t in group],
                              device=student.device)  # fmt: skip
        nan = float("nan")
        known = [list(t.engine_logprobs) if t.engine_logprobs is not None else [nan] * t.length for t in group]
        rollout = torch.tensor([k + [nan] * (t_max - len(k)) for k in known], device=student.device)
        s = self.sampling
        logp, _ = token_logprobs(student, tokens, temperature=s.temperature or 1.0, top_k=s.top_k, top_p=s.top_p)
        adv = distillation_advantage(student, teacher, tokens, temp)
        per_token, clipped = proximal_distillation(logp, rollout, adv, mask, self.spec.proximal_clip)
        return per_token, clipped, adv

    def _anchor_loss(self, rows: list[AnchorRow], norm: TurnNorm, share: float) -> tuple[torch.Tensor, float]:
        """The anchor's part: the term's divergence between the start (adapters off, no gradient) as the teacher
        and the student on the rows' unmasked tokens; the loss and the logged per-token mean."""
        spec, temp = self.spec.divergence, self.temperature()
        lengths, ids = [r.length for r in rows], [r.ids for r in rows]
        mask = self.target_mask(rows)
        with self.eval_mode():
            with torch.no_grad(), reference_forward(self.policy):
                start = self.turn_logits(ids, lengths, "student")
            now = self.turn_logits(ids, lengths, "student")
        div = token_divergence(now, start, spec, temp)
        weight = self.spec.kl_coefficient * self.spec.anchor_weight
        loss = share * weight * masked_mean(div, mask, norm.anchor)
        return loss, share * float(masked_mean(div.detach(), mask, norm.anchor_tokens))

    # ----------------------------------------------------------------------------------------- checkpoints
    def save(self, checkpoint: dict[str, Any]) -> None:
        """The EMA teacher's weights into the owner's checkpoint (a resumed run continues the same average)."""
        if self.ema is not None:
            checkpoint[EMA_KEY] = {k: v.detach().cpu().clone() for k, v in self.ema.items()}

    def load(self, checkpoint: dict[str, Any]) -> None:
        """The EMA teacher's weights from the owner's checkpoint."""
        if self.spec.teacher == "ema":
            if EMA_KEY not in checkpoint:
                raise ValueError("teacher='ema' but the checkpoint holds no EMA weights (written with another teacher)")
            self.ema = {k: v.to(self.device) for k, v in checkpoint[EMA_KEY].items()}
