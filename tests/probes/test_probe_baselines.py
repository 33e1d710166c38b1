"""The baselines that read no activations: length alone and topic alone."""

from __future__ import annotations

import numpy as np

from propel.probes.baseline import input_length, length_only_predictions, topic_only_predictions


def test_length_alone_learns_a_label_that_follows_length():
    rng = np.random.default_rng(0)
    sizes = rng.integers(5, 400, 200)
    items = ["x" * int(n) for n in sizes]
    y = sizes > 200
    test = ["x" * 20, "x" * 390, "x" * 50, "x" * 300]
    assert length_only_predictions(items, y, test).tolist() == [False, True, False, True]


def test_input_length_reads_texts_and_turn_lists():
    assert input_length("abcd") == 4.0
    assert input_length([{"role": "assistant", "content": "ab"}, {"content": None}, "xyz"]) == 5.0


def test_topic_alone_predicts_positive_where_the_topics_rate_beats_the_overall_rate():
    topics = ["a"] * 10 + ["b"] * 10 + ["c"] * 10
    y = np.array([1] * 6 + [0] * 4 + [1] * 1 + [0] * 9 + [1] * 2 + [0] * 8)  # rates 0.6, 0.1, 0.2; overall 0.3
    got = topic_only_predictions(topics, y, ["a", "b", "c", "unseen"])
    assert got.tolist() == [True, False, False, False]
