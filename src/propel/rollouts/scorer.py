"""Scorers score rollouts for one kind of task, so a trainer can score without knowing the kind.

``score`` fills each ``Sample``'s verdict in place: ``valid``, ``task``, ``topic`` and ``info`` (``reason`` always,
``task_text`` when there is a task). PROPEL's generator side wraps a ``Domain`` (``GeneratorScorer``: the completion
is a task, parsed and checked for validity in a sandbox); a solver-side scorer (test suites, triage) parses
answers and grades them against the gold data in ``sample.context``. A scorer that runs model-written code
owns the sandbox it starts (``open``/``close``, or ``with``) and uses the one it is given otherwise.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

from propel.domains.agents import WritesInEpisodes
from propel.domains.interface import DEGENERATE, Domain
from propel.records import Sample, Task
from propel.sandbox.sandbox import Sandbox


class Scorer(ABC):
    """Scores the samples of one task kind (and holds the verifier sandbox they need)."""

    stop: tuple[str, ...] = ()
    """Stop strings for the policy's sampling with this scorer."""
    needs_sandbox: bool = True
    """Whether scoring runs model-written code (then ``open`` starts a local sandbox when none is given)."""

    def __init__(self, sandbox: Sandbox | None = None) -> None:
        self.sandbox, self._owns_sandbox = sandbox, False

    def open(self) -> Scorer:
        """Start a ``LocalSandbox`` (2 workers) when scoring needs one and none was given; idempotent."""
        if self.sandbox is None and self.needs_sandbox:
            from propel.sandbox.local import LocalSandbox

            self.sandbox, self._owns_sandbox = LocalSandbox(max_workers=2), True
        return self

    def close(self) -> None:
        """Stop the sandbox this scorer started (one it was given stays up)."""
        if self._owns_sandbox and self.sandbox is not None:
            self.sandbox.close()
            self.sandbox, self._owns_sandbox = None, False

    def __enter__(self) -> Scorer:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    @abstractmethod
    def score(self, samples: Sequence[Sample]) -> None:
        """Fill ``valid``, ``task``, ``topic`` and ``info`` of every sample, in place (batched where it can)."""


class GeneratorScorer(Scorer):
    """PROPEL's generator side: a completion is a task of ``domain``; parse it, check validity, render it."""

    def __init__(self, domain: Domain, sandbox: Sandbox | None = None) -> None:
        super().__init__(sandbox)
        if not isinstance(domain, Domain):
            raise TypeError(f"GeneratorScorer needs a propel.domains.interface.Domain, got {type(domain).__name__}")
        self.domain = domain
        self.stop = tuple(domain.generator_stop)
        self.needs_sandbox = domain.needs_sandbox

    def score(self, samples: Sequence[Sample]) -> None:
        """Parse, check and render each sample's task. A generator *episode*'s task (a sample with collected
        workspace ``files``, for a domain that ``WritesInEpisodes``) is what it left in its workspace, not what it
        said; that text is kept in ``artifacts["task_completion"]``. Everything else parses its completion."""
        domain = self.domain
        texts = [task_text(domain, s) for s in samples]
        for s, text in zip(samples, texts, strict=True):
            s.valid = False
            if domain.cut_completions_invalid and cut_at_limit(s):
                s.task, s.topic = None, None
                s.info["reason"] = CUT
                continue
            parsed = domain.parse(text)
            if isinstance(parsed, Task):
                s.task, s.topic = parsed, domain.topic(parsed)
                s.info.update(task_text=domain.render(parsed), reason="unchecked")
            else:
                s.task, s.topic = None, None
                s.info["reason"] = parsed.reason
        parsed_rows = [s for s in samples if s.task is not None]
        if not parsed_rows:
            return
        if self.needs_sandbox and self.sandbox is None:
            raise RuntimeError("GeneratorScorer.score needs a sandbox: call open() first (or pass one)")
        verdicts = domain.validity([s.task for s in parsed_rows], self.sandbox)
        for sample, verdict in zip(parsed_rows, verdicts, strict=True):
            sample.valid, sample.info["reason"] = bool(verdict.ok), verdict.reason
            sample.topic = domain.topic(sample.task)  # validity may have filled what the topic reads (SWE: files)
            if sample.valid:
                mark_degenerate(domain, sample)


def mark_degenerate(domain: Domain, sample: Sample) -> None:
    """Apply the domain's degeneracy rule to a sample that passed ``validity``: under ``domain.strict`` it becomes
    invalid with reason ``degenerate:<why>`` (its ground truth stays, so evaluation can still report the lenient
    yield beside the strict one); otherwise it stays valid and ``info["degenerate"]`` records why. The one place the
    rule is applied: GRPO, labeling, mining and evaluation all score through ``GeneratorScorer``."""
    why = domain.degeneracy(sample.task)
    if why is None:
        return
    sample.info["degenerate"] = why
    if domain.strict:
        sample.valid, sample.info["reason"] = False, DEGENERATE + why


CUT = "cut at the token limit"
"""The invalid reason of a completion the engine cut (``Domain.cut_completions_invalid``)."""


def cut_at_limit(sample: Sample) -> bool:
    """Whether a one-turn completion sampled by an engine ended at the token limit, not at a stop string or EOS."""
    turns = [t for t in sample.turns if t.role == "assistant"]
    return len(turns) == 1 and bool(turns[0].token_ids) and turns[0].finish_reason == "length"


def task_text(domain: Domain, sample: Sample) -> str:
    """The text ``domain.parse`` reads for ``sample``: what a generator episode left (and it is recorded), else the
    completion. The one rule for tasks written by generator agents, in GRPO, labeling and evaluation."""
    if isinstance(domain, WritesInEpisodes) and "files" in sample.artifacts:
        text = domain.episode_completion(sample.context, sample.artifacts, sample.assistant_texts)
        sample.artifacts["task_completion"] = text
        return text
    return sample.completion
