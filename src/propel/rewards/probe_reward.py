"""PROPEL's probe rewards: a frozen activation probe's logit, gated by task validity (the paper's §3, ablations).

The gate itself is ``propel.probes.gate.gated_reward``, the one definition the sweep's RVP selects probes with.
Unless the gate's ``floor`` is given, the floor of invalid tasks is ``propel.probes.gate.default_floor``: below every
probe's recorded minimum logit (ensemble members and the constraint included), so being invalid never pays.

The probe is injected (any object with ``.logits(texts) -> Tensor``, e.g. ``propel.probes.ProbeScorer``, or a
plain callable ``texts -> Tensor`` of logits), or named by its artifact folder (``artifact: runs/probe/artifact`` in
YAML): then the scorer is built at ``setup`` (or on first use), reading the GRPO policy with its adapters disabled as
the frozen reference when the artifact's reference model is the policy's base model (no second copy in memory).

Cold transfer (the PROPEL paper's §6): the policy may be another model family, with another tokenizer, than the
reference. The reward is a function of texts only (``text``: the domain's rendering of the task parsed from the policy's
decoded completion), and the reference tokenizes them with its own tokenizer (``ProbeScorer``); when the policy's base
model is not the reference, the reference is loaded on its own, once. ``configs/math/cold_transfer.yaml`` shows it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Protocol

import torch

from propel.probes.gate import PROBE_MODES, GateSpec, gated_reward, needs_logit
from propel.records import Sample, Task
from propel.rewards.reward import Reward, RewardContext

__all__ = ["PROBE_MODES", "MinProbe", "ProbeReward", "constrained", "worst_case"]

TEXTS = ("task", "completion", "prompt+completion", "turns")


class TaskText(str):
    """A task's rendering (what a probe reads) that also carries the parsed task, for rankers that read the task
    itself (``propel.probes.rivals.RivalRanker`` on the domain's features or its zero-fit rule)."""

    task: Task | None

    def __new__(cls, text: str, task: Task | None = None) -> TaskText:
        out = super().__new__(cls, text)
        out.task = task
        return out


class ProbeLike(Protocol):
    def logits(self, texts: list[str]) -> torch.Tensor: ...


def _logits(
    probe: ProbeLike | Callable[[list[str]], torch.Tensor], texts: list[str], calibrated: bool = False
) -> torch.Tensor:
    """Raw logits, or calibrated ones (``calibrated_logits``, when the probe has a calibration) for probabilities."""
    fn = (calibrated and getattr(probe, "calibrated_logits", None)) or getattr(probe, "logits", probe)
    return torch.as_tensor(fn(texts), dtype=torch.float32).reshape(-1).cpu()


def _members(probe) -> list:
    return list(probe.probes) if isinstance(probe, MinProbe) else [probe]


class MinProbe:
    """Pessimistic combination: the minimum logit over several probes (same as the minimum probability).

    Worst-case optimisation (WCO) over an ensemble, or an adversarial constraint probe next to the main one:
    the policy only gains by pleasing every probe, which makes exploiting one probe's blind spot unprofitable.
    """

    def __init__(self, probes: Sequence[ProbeLike | Callable[[list[str]], torch.Tensor]]) -> None:
        if not probes:
            raise ValueError("MinProbe needs at least one probe")
        self.probes = list(probes)

    def logits(self, texts: list[str]) -> torch.Tensor:
        return torch.stack([_logits(p, texts) for p in self.probes]).min(dim=0).values

    def calibrated_logits(self, texts: list[str]) -> torch.Tensor:
        """The minimum over members of each member's calibrated logit (the pessimistic calibrated probability)."""
        return torch.stack([_logits(p, texts, calibrated=True) for p in self.probes]).min(dim=0).values


def worst_case(probes: Sequence) -> MinProbe:
    """WCO: the minimum over an ensemble of probes."""
    return MinProbe(probes)


def constrained(main, auxiliary) -> MinProbe:
    """Main probe constrained by an auxiliary (adversarially mined) probe: ``min(main, auxiliary)``."""
    return MinProbe([main, auxiliary])


class ProbeReward(Reward):
    """Reward from a probe's logit, combined with validity.

    Args:
        probe: object with ``.logits(texts)`` or a callable ``texts -> logits``; or None with ``artifact``.
        artifact: folder of a saved probe (``ProbeArtifact.save``), used when ``probe`` is None; a list of folders
            is an ensemble scored by its minimum logit (worst-case optimisation, WCO). The probe stage's
            ``artifact/`` may hold a rival instead (``propel.probes.rivals``, when it ranked held-out tasks better
            than the probe): it is loaded and gated the same way.
        constraint: folder of an auxiliary probe (e.g. trained on adversarially mined false positives, see
            ``propel.callbacks.adversarial``): the score becomes ``min(main, auxiliary)``.
        reference_model: the reference model for ``artifact``; None uses the one recorded in the artifact.
        gate: how the logit and validity become the reward (``propel.probes.gate.GateSpec``: the mode, the floor
            invalid samples get, None for below every probe's recorded pool minimum, the soft gate's clip); the
            probe job's RVP selects with the same object.
        text: which text the probe reads: ``"task"`` (default: the domain's rendering of the parsed task, what
            labeling pools hold and the probe was trained on; falls back to the completion), ``"completion"`` or
            ``"prompt+completion"``; or ``"turns"``: the episode's assistant turns as a trajectory (multi-turn
            generators whose probe was trained on generator episodes, ``Domain.probe_input``: SWE).
        share_policy: with ``artifact``, read the policy offered at ``setup`` with adapters disabled when its base
            model is the reference (saves a model copy); False always loads a separate frozen reference.
        batch_size: texts per reference forward pass (with ``artifact``).
        name: component name for logging.
        weight: weight in a ``CombinedReward``.
    """

    def __init__(
        self,
        probe: ProbeLike | Callable[[list[str]], torch.Tensor] | None = None,
        gate: GateSpec | None = None,
        text: str = "task",
        name: str = "probe",
        weight: float = 1.0,
        artifact: str | list[str] | None = None,
        constraint: str | None = None,
        reference_model: str | None = None,
        share_policy: bool = True,
        batch_size: int = 8,
    ) -> None:
        if text not in TEXTS:
            raise ValueError(f"text must be one of {TEXTS}, got {text!r}")
        if (probe is None) == (artifact is None):
            raise ValueError("ProbeReward needs exactly one of `probe` (an object) or `artifact` (a probe folder)")
        if artifact is not None and not isinstance(artifact, str) and not artifact:
            raise ValueError("artifact: an empty list; give one probe folder or several (WCO)")
        self.probe, self.gate = probe, gate or GateSpec()
        self._given = probe
        self.constraint = constraint
        self._built = probe is not None and constraint is None
        self.text, self.name, self.weight = text, name, weight
        self.artifact, self.reference_model, self.share_policy, self.batch_size = (
            artifact,
            reference_model,
            share_policy,
            batch_size,
        )
        self._context: RewardContext | None = None
        self._floor: float | None = None
        self._references: dict[str, tuple] = {}
        self.last_logits: torch.Tensor | None = None
        """The logits the gate read in the latest call (NaN where none was scored): what probe mining compares."""

    def setup(self, context: RewardContext) -> None:
        """Take the trainer's policy (``context.model_name`` = its base) as the frozen reference of an artifact."""
        self._context = context
        if not self._built:  # load now, at setup, not inside the first training step
            self._build()

    def _build(self) -> None:
        """The scorer: the given probe or the artifact(s), min-combined with the constraint probe when set."""
        if self.probe is not None:
            parts = [self.probe]
        else:
            folders = [self.artifact] if isinstance(self.artifact, str) else list(self.artifact)
            parts = [self._scorer(folder) for folder in folders]
        if self.constraint is not None:
            parts.append(self._scorer(self.constraint))
        self.probe = parts[0] if len(parts) == 1 else MinProbe(parts)
        self._built = True

    @property
    def floor(self) -> float | None:
        """The reward of invalid samples (None in ``probe_only``): the gate's floor, or the default rule's value."""
        if self._floor is None and self.gate.mode != "probe_only":
            if self.gate.floor is not None:
                self._floor = self.gate.floor
            else:
                names, quantiles = self._quantiles()
                self._floor = self.gate.floor_for(quantiles, names)
        return self._floor

    @property
    def floor_margin(self) -> float:
        """How far above ``floor`` the gate lifts a valid task's reward (``probes.gate.floor_margin``): what
        ``RewardFloorCheck`` counts valid samples under."""
        return self.gate.margin

    def _quantiles(self) -> tuple[list[str], list[dict | None]]:
        """Every scored probe's recorded pool quantiles (None where it has none), with a name for warnings."""
        from propel.probes.rivals import load_ranker

        names: list[str] = []
        found: list[dict | None] = []
        for member in _members(self._given) if self._given is not None else []:
            names.append(type(member).__name__)
            found.append(getattr(member, "logit_quantiles", None))
        folders = [] if self.artifact is None else [self.artifact] if isinstance(self.artifact, str) else self.artifact
        for folder in [*folders, *([self.constraint] if self.constraint is not None else [])]:
            names.append(f"probe artifact {folder}")
            found.append(load_ranker(folder).logit_quantiles)
        return names, found

    def _shares(self, ctx: RewardContext | None, reference: str) -> bool:
        """Whether the policy offered at setup is ``reference`` (read it with adapters disabled, load nothing)."""
        from propel.models.loading import resolve_model_dir

        if not self.share_policy or ctx is None or ctx.policy is None or ctx.model_name is None:
            return False
        return os.path.realpath(resolve_model_dir(ctx.model_name)) == os.path.realpath(resolve_model_dir(reference))

    def _scorer(self, folder: str) -> ProbeLike:
        from propel.models import load_model
        from propel.probes.artifact import ProbeArtifact, ProbeScorer
        from propel.probes.rivals import RivalRanker, is_rival

        if is_rival(folder):  # a rival the probe stage chose as the reward: it reads no activations
            return RivalRanker.load(folder)
        art = ProbeArtifact.load(folder)
        reference = self.reference_model or art.reference_model
        ctx = self._context
        if self._shares(ctx, reference):
            return ProbeScorer(art, ctx.policy, ctx.tokenizer, batch_size=self.batch_size)
        if reference not in self._references:  # one frozen copy per reference model, shared by the ensemble
            self._references[reference] = load_model(reference)
        model, tokenizer = self._references[reference]
        return ProbeScorer(art, model, tokenizer, batch_size=self.batch_size)

    def _text(self, s: Sample) -> str | list[str]:
        if self.text == "turns":
            return s.assistant_texts or [s.completion]
        if self.text == "task":
            return TaskText(s.task_text, s.task)
        return s.completion if self.text == "completion" else s.prompt + s.completion

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        """``gated_reward`` of the probe's logits; the probe scores only the texts the gate reads."""
        valid = torch.tensor([bool(s.valid) for s in samples], dtype=torch.bool)
        floor = self.floor
        scored = needs_logit(valid, self.gate.mode).nonzero().flatten().tolist()
        logits = torch.full((len(samples),), float("nan"))
        if scored:
            if not self._built:
                self._build()
            calibrated = self.gate.mode == "soft_gate"
            got = _logits(self.probe, [self._text(samples[i]) for i in scored], calibrated=calibrated)
            if got.numel() != len(scored):
                raise ValueError(f"probe returned {got.numel()} logits for {len(scored)} texts")
            logits[scored] = got
        self.last_logits = logits
        return gated_reward(logits, valid, self.gate, floor)
