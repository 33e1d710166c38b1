"""GeneratorScorer: the one parse -> validity -> render step, and the sandbox it owns or borrows."""

from __future__ import annotations

import pytest

from propel.domains.interface import Domain, ParseFailure, Verdict
from propel.records import Context, Prompt, Sample, Task, Turn
from propel.rollouts import GeneratorScorer
from propel.rollouts.scorer import CUT


class WordDomain(Domain):
    name, needs_sandbox, generator_stop = "words", False, ("\n\n",)

    def contexts(self, n, seed=0):
        return [Context(id=f"w-{i}", prompt=Prompt(text=f"{i}:")) for i in range(n)]

    def parse(self, completion):
        text = completion.strip()
        return Task(self.name, {"text": text}) if text else ParseFailure("blank")

    def validity(self, tasks, sandbox=None):
        return [Verdict(len(t.data["text"]) > 2, "ok" if len(t.data["text"]) > 2 else "short") for t in tasks]

    def solver_prompt(self, task):
        return Prompt(text=task.data["text"])

    def grade(self, task, completions, sandbox=None):
        return [True for _ in completions]

    def topic(self, task):
        return task.data["text"][0]

    def render(self, task):
        return f"<{task.data['text']}>"


def test_score_fills_verdicts_in_place():
    scorer = GeneratorScorer(WordDomain())
    samples = [Sample("p", " hello "), Sample("p", "  "), Sample("p", "hi")]
    scorer.score(samples)
    assert [s.valid for s in samples] == [True, False, False]
    assert [s.info["reason"] for s in samples] == ["ok", "blank", "short"]
    assert samples[0].task_text == "<hello>" and samples[0].topic == "h"
    assert samples[1].task is None and samples[1].task_text == "  "  # no task: the raw completion
    assert scorer.stop == ("\n\n",)


def test_a_completion_cut_at_the_token_limit_is_invalid_where_the_domain_says_so():
    class Cut(WordDomain):
        cut_completions_invalid = True

    def sample(finish):
        return Sample("p", "hello", turns=[Turn("assistant", "hello", token_ids=[1, 2], finish_reason=finish)])

    for domain, expected in ((Cut(), [True, False]), (WordDomain(), [True, True])):
        samples = [sample("stop"), sample("length")]
        GeneratorScorer(domain).score(samples)
        assert [s.valid for s in samples] == expected
    assert samples[1].info["reason"] == "ok" and samples[1].task is not None
    cut = [sample("length")]
    GeneratorScorer(Cut()).score(cut)
    assert cut[0].info["reason"] == CUT and cut[0].task is None
    manual = [Sample("p", "hello")]  # not sampled by an engine (no token ids): parsed as written
    GeneratorScorer(Cut()).score(manual)
    assert manual[0].valid


def test_sandbox_is_started_and_stopped_only_when_needed():
    class Sandboxed(WordDomain):
        needs_sandbox = True

    with GeneratorScorer(WordDomain()) as scorer:
        assert scorer.sandbox is None
    scorer = GeneratorScorer(Sandboxed())
    with pytest.raises(RuntimeError, match="open"):
        scorer.score([Sample("p", "hello")])
    with scorer:
        assert scorer.sandbox is not None
        scorer.score([Sample("p", "hello")])
    assert scorer.sandbox is None
    borrowed = object()
    with GeneratorScorer(Sandboxed(), sandbox=borrowed) as scorer:
        assert scorer.sandbox is borrowed
    assert scorer.sandbox is borrowed  # a given sandbox is not closed


def test_rejects_non_domain():
    with pytest.raises(TypeError, match="Domain"):
        GeneratorScorer("math")
