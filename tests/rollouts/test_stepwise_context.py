"""The context limit on a step-wise episode: when a template that rewrites history makes the episode
go on from a fresh tokenization, that new segment's prompt is checked against ``max_context`` as an appended message
is; one that leaves no room for a generated token ends the episode as ``length`` instead of opening a segment whose
training row is longer than the context."""

from __future__ import annotations

import copy

from test_episodes import STRIP_THINKING, MemoryFilesEnv, Recording, _contexts, _script

from propel.engines.engine import SamplingSpec
from propel.rollouts.episode_runner import EpisodeRunner

SAMPLING = SamplingSpec(n=1, max_new_tokens=64)


def _run(tok, max_context=None):
    engine = Recording(tok, lambda p: "<think>plan</think>" + _script(p))
    runner = EpisodeRunner(engine, MemoryFilesEnv, concurrency=1, max_context_tokens=max_context)
    (group,), _ = runner.run(_contexts(1), SAMPLING)
    return group[0]


def test_a_fresh_segment_that_does_not_fit_ends_the_episode(tokenizer):
    tok = copy.deepcopy(tokenizer)
    tok.chat_template = STRIP_THINKING
    free = _run(tok)
    first, second = free.segments[0], free
    fits = len(first.prompt_ids) + len(first.turns[0].token_ids)  # the first segment's prompt and turn
    assert len(second.prompt_ids) > fits + 3  # the fresh tokenization is longer than that
    s = _run(tok, max_context=fits + 3)
    rows = [*s.segments, s]
    assert s.info["finish_reason"] == "length" and s.segments == []
    assert all(len(r.prompt_ids) + len(r.response_ids) <= fits + 3 for r in rows)
    assert [t.role for t in s.turns] == ["assistant", "tool"] and s.turns[-1].token_ids == []
    assert s.turns[-1].text == "wrote a.txt" and s.turns[0].token_ids == first.turns[0].token_ids
