"""An episode as rows of its exact ids with each token's assistant turn: one row per step-wise segment, turns counted
over the whole episode as hints count them, prompt and observations -1, a trailing observation dropped."""

from __future__ import annotations

from propel.records import Sample, Turn
from propel.rollouts.episode_rows import episode_rows
from propel.rollouts.hints import turn_context
from tests.rollouts.test_hints import _episode


def test_one_row_holds_every_turn_with_its_label(tokenizer):
    sample, _ = _episode(tokenizer, ["ls", "echo hi", "done"], [("a.txt", {}), ("ok", {}), (None, {})])
    (row,) = episode_rows(sample)
    assert row.ids == sample.prompt_ids + sample.response_ids
    assert row.turns[: len(sample.prompt_ids)] == [-1] * len(sample.prompt_ids) and row.first == len(sample.prompt_ids)
    labels = [k for turn, k in zip(sample.turns, (0, -1, 1, -1, 2), strict=True) for _ in turn.token_ids]
    assert row.turns[row.first :] == labels and row.length == len(sample.response_ids)
    for k in range(3):  # the labels agree with the context a hint at turn k reads
        prefix, ids = turn_context(sample, k)
        start = row.turns.index(k)
        assert row.ids[:start] == prefix and row.ids[start : start + len(ids)] == ids


def test_step_wise_segments_are_rows_of_their_own_and_trailing_observations_are_dropped():
    tool = Turn("tool", "", [], trainable=False)  # a segment's last observation opens the next segment's prompt
    first = Sample("", "", prompt_ids=[1, 2], turns=[Turn("assistant", "", [3, 4]), tool])
    last = Sample("", "", prompt_ids=[9, 9, 3, 4, 8], segments=[first],
                  turns=[Turn("assistant", "", [5]), Turn("tool", "", [6, 7], trainable=False)])  # fmt: skip
    rows = episode_rows(last)
    assert [r.ids for r in rows] == [[1, 2, 3, 4], [9, 9, 3, 4, 8, 5]]
    assert [r.turns for r in rows] == [[-1, -1, 0, 0], [-1, -1, -1, -1, -1, 1]]
    assert episode_rows(Sample("", "", prompt_ids=[1], turns=[])) == []
