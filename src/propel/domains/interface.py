"""The domain interface: what a task domain owns, from generator prompts to grading.

A domain turns generator completions into tasks, checks them cheaply (sandboxed), writes the solver prompt and grades
solver completions. Everything that runs model-written code goes through a ``propel.sandbox.sandbox.Sandbox``.
"""

from __future__ import annotations

import json
import random
from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from propel.engines.engine import Engine
from propel.records import Context, Prompt, Task, TaskSource
from propel.sandbox.sandbox import Sandbox


class ParseFailure(NamedTuple):
    """Why a completion is not a task (a short, stable reason string, e.g. ``"no_code_block"``)."""

    reason: str


@dataclass(frozen=True)
class AnswerText:
    """The text every right solver completion starts with, when a domain's right answer has one canonical text
    (few-shot math: `` 42``), and a regex over the next token's text that would make it another answer (a further
    digit). With it a task's solve probability is computed exactly by teacher forcing
    (``propel.domains.exact_trials``) instead of estimated from n sampled attempts."""

    prefix: str
    extends: str = ""
    """Regex matched at the start of the next token's decoded text; a match continues the answer (``42`` -> ``421``)
    and so is not a solve. Empty: any next token ends the answer."""


class Verdict(NamedTuple):
    """Validity of one task: ``ok`` and a short reason (``"ok"`` when valid)."""

    ok: bool
    reason: str


DEGENERATE = "degenerate:"
"""Prefix of the invalid reason of a degenerate task (``degenerate:answer_stated``): a task that parses, runs and
has ground truth, but whose solving needs none of the work the domain is about (``Domain.degeneracy``)."""


def is_degenerate(reason: str | None) -> bool:
    """Whether an invalid reason names a degenerate task (a lenient validity would have let it through)."""
    return isinstance(reason, str) and reason.startswith(DEGENERATE)


def lenient_valid(valid: bool, reason: str | None) -> bool:
    """Validity without the degeneracy rule: valid, or invalid only for being degenerate. What the lenient yield
    (shown beside the strict one, labelled) counts."""
    return bool(valid) or is_degenerate(reason)


def few_shot_contexts(name: str, n: int, seed: int, blocks: Sequence[str], k: int, cue: str) -> list[Context]:
    """``n`` generator contexts of ``k`` example blocks each (a seeded draw per context) followed by ``cue``; the
    group names the drawn examples, so contexts that share them are kept together by grouped splits."""
    out = []
    for i in range(n):
        picks = random.Random(f"{name}:{seed}:{i}").sample(range(len(blocks)), k)
        group = "shots-" + "-".join(str(j) for j in sorted(picks))
        prompt = Prompt(text="".join(blocks[j] for j in picks) + cue)
        out.append(Context(id=f"{name}-{seed}-{i}", prompt=prompt, group=group))
    return out


class Domain(TaskSource):
    """A task domain. Subclasses define ``name`` and the six abstract methods below; a domain whose tasks an agent
    can solve also takes ``agents.SolvedByAgents``, one whose generator can be an agent ``agents.WritesInEpisodes``."""

    name: str = "domain"
    needs_sandbox: bool = True
    """False for domains that never run model-written code (no sandbox is started for them)."""
    solver_stop: tuple[str, ...] = ()
    """Stop strings for solver sampling."""
    generator_stop: tuple[str, ...] = ()
    """Stop strings for generator sampling (e.g. a blank line for raw few-shot prompts)."""
    needs_oracle: bool = False
    """True for domains whose reference answers come from an oracle model (given with ``set_oracle``)."""
    degenerate_reasons: tuple[str, ...] = ()
    """Every reason ``degeneracy`` may give, each explained in the domain's docstring (reports count each)."""
    strict: bool = True
    """Degenerate tasks are invalid (``degenerate:<reason>``, the gate's floor), in training, labeling and evaluation
    alike; False keeps them valid (the lenient rule) and still records their reason in ``info["degenerate"]``."""
    cut_completions_invalid: bool = False
    """True for domains whose generator writes a task as one completion ended by a stop string: a completion the
    engine cut at the token limit (``finish_reason="length"``) may be a truncated task (``3 * 12`` cut to ``3 * 1``
    still parses), so it is invalid in training, labeling and evaluation alike."""

    @abstractmethod
    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        """``n`` generator contexts, deterministic in ``seed``; ids are unique and stable across calls."""

    @abstractmethod
    def parse(self, completion: str) -> Task | ParseFailure:
        """Structured task from a generator completion, or why it is malformed."""

    @abstractmethod
    def validity(self, tasks: Sequence[Task], sandbox: Sandbox) -> list[Verdict]:
        """Cheap checks (sandboxed where code runs); valid tasks get their ground truth written into ``task.data``."""

    @abstractmethod
    def solver_prompt(self, task: Task) -> Prompt:
        """The prompt the solver sees for a valid task."""

    @abstractmethod
    def grade(self, task: Task, completions: Sequence[str], sandbox: Sandbox) -> list[bool]:
        """Pass/fail for each solver completion of a valid task."""

    @abstractmethod
    def topic(self, task: Task) -> str:
        """A coarse topic label (for top-topic diversity)."""

    def degeneracy(self, task: Task) -> str | None:
        """Why a task that passed ``validity`` needs none of the domain's work (one of ``degenerate_reasons``: its
        answer is stated in what the solver sees, it performs no operation, ...), or None. Reads the ground truth
        ``validity`` wrote. None by default: a domain without such a rule says so in its docstring."""
        return None

    def task_features(self, task: Task) -> dict[str, float]:
        """Cheap numbers about a valid task that need no model (answer size, operations, length): the features of the
        rivals a probe must beat (``propel.probes.rivals``). Same keys for every task of the domain; none by
        default (then only the text classifier and the zero-fit rule compete)."""
        return {}

    def zero_fit_score(self, task: Task) -> float | None:
        """The domain's unfitted ranking rule (higher: more likely in the solver's band), declared before any data:
        the cheapest rival a probe must beat (math: prefer the smaller answer). None: the domain declares none."""
        return None

    def set_oracle(self, engine: Engine) -> None:  # noqa: B027 - optional hook
        """Take the engine whose answers become references (domains with ``needs_oracle``); others ignore it."""

    def render(self, task: Task) -> str:
        """Human-readable task text (what diversity metrics read, and probes unless ``probe_input`` says more)."""
        return json.dumps(task.data, sort_keys=True)

    def task_metrics(self, task: Task) -> dict[str, float]:
        """Per-task numbers an evaluation averages over valid tasks, with intervals, and a base-vs-trained comparison
        compares (SWE: diff size, failing tests); none by default."""
        return {}

    def answer_text(self, task: Task) -> AnswerText | None:
        """The canonical start of a right solver completion of a valid task, when there is one (``AnswerText``);
        None (the default): only sampled trials measure how often the solver is right."""
        return None

    def probe_input(self, task: Task) -> str | list[str]:
        """What a probe reads of a task: its rendering, or the turns of the generator episode that wrote it (a
        trajectory: each turn pooled over its tokens, then across turns; ``propel.probes.ActivationExtractor``)."""
        return self.render(task)
