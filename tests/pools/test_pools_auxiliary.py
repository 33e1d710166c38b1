"""The auxiliary probe's pool on a synthetic mined pool: negatives are exactly the out-of-band mined tasks plus the
collapsed topic's valid tasks, positives are the original positives, and no task is both."""

from __future__ import annotations

import pytest

from propel.pools import MINED_SCHEMA, read_pool, write_part
from propel.pools.auxiliary import adversarial_pool, auxiliary_rows, dominant_topic
from propel.records import Task


def _row(i: str, label, topic: str = "t", valid: bool = True, text: str | None = None, **extra) -> dict:
    task = Task("count", {"text": text or i}).to_json() if valid else None
    row = dict(id=i, group="g", domain="count", context="{}", completion=text or i, task=task, valid=valid)
    row.update(reason="ok", grades=[True, False], solve_count=1 if label else 0, label=label, topic=topic)
    row.update(n_trials=2, solver_tokens=3, **extra)
    return row


def _mined(i: str, label: int, topic: str, text: str | None = None) -> dict:
    return _row(i, label, topic, text=text, probe_logit=2.0, step=5)


@pytest.fixture()
def pools(tmp_path):
    original = [
        _row("p1", 1, "money"),
        _row("p2", 1, "time"),
        _row("p3", 1, "money", text="shared"),  # a positive whose task the policy also writes, below
        _row("n1", 0, "money"),
        _row("bad", None, "money", valid=False),
    ]
    mined = [
        _mined("m-fp1", 0, "money"),  # out of band: negative
        _mined("m-fp2", 0, "time"),  # out of band, another topic: negative all the same
        _mined("m-in1", 1, "money"),  # in band, of the collapsed topic: negative as a topic task
        _mined("m-in2", 1, "time"),  # in band, another topic: not a negative
        _mined("m-fp3", 0, "money", text="shared"),  # the original positive's task: stays positive only
    ]
    evaluation = [_row("e1", 0, "money"), _row("e2", 1, "money"), _row("e3", 0, "time"), _row("e4", None, valid=False)]
    write_part(tmp_path / "orig", original)
    write_part(tmp_path / "mined", mined, MINED_SCHEMA)
    write_part(tmp_path / "eval", evaluation)
    return tmp_path


def test_negatives_are_exactly_false_positives_plus_the_collapsed_topic(pools):
    info = adversarial_pool(
        pools / "orig", pools / "mined", pools / "aux", topic_from=[pools / "mined", pools / "eval"]
    )
    pool = read_pool(pools / "aux")
    labels = dict(zip(pool["id"], pool["label"], strict=True))
    assert {i for i, y in labels.items() if y == 1} == {"p1", "p2", "p3"}
    assert {i for i, y in labels.items() if y == 0} == {
        "m-fp1",
        "m-fp2",
        "topic:m-in1",
        "topic:e1",
        "topic:e2",
    }
    positives = set(pool.loc[pool["label"] == 1, "task"])
    negatives = set(pool.loc[pool["label"] == 0, "task"])
    assert not positives & negatives and len(negatives) == 5  # no task both, no task twice
    # money: 5 of the 8 valid mined + evaluation rows with a topic (m-fp1, m-in1, shared, e1, e2)
    assert info["topic"] == info["topic_found"] == "money" and info["topic_share"] == pytest.approx(5 / 8)
    assert info["false_positives"] == 2 and info["topic_negatives"] == 3
    assert info["dropped_positive_overlap"] == 2  # "shared" as a false positive and again as a topic task
    assert pool["valid"].all() and info["rows"] == 8


def test_the_topic_rule_is_configurable(pools):
    orig, mined = read_pool(pools / "orig"), read_pool(pools / "mined")
    # below the share threshold the most common topic is not a collapse: only false positives are negatives
    rows, info = auxiliary_rows(orig, mined, [mined], min_topic_share=0.7)
    assert info["topic"] is None and info["topic_found"] == "money" and info["topic_negatives"] == 0
    assert {r["id"] for r in rows if r["label"] == 0} == {"m-fp1", "m-fp2"}
    # a topic named by hand wins over the count
    rows, info = auxiliary_rows(orig, mined, [mined], topic="time")
    assert {r["id"] for r in rows if r["label"] == 0} == {"m-fp1", "m-fp2", "topic:m-in2"}
    # keep_negatives adds the original valid negatives
    rows, _ = auxiliary_rows(orig, mined, keep_negatives=True)
    assert {r["id"] for r in rows if r["label"] == 0} == {"m-fp1", "m-fp2", "n1"}


def test_dominant_topic_ties_and_empty():
    import pandas as pd

    frame = pd.DataFrame([_row("a", 0, "b"), _row("b", 0, "a"), _row("c", 0, None), _row("d", 0, "x", valid=False)])
    assert dominant_topic([frame]) == ("a", 0.5, 2)  # ties: alphabetically first; no topic and invalid not counted
    assert dominant_topic([]) == (None, None, 0)


def test_nothing_to_learn_is_refused(pools, tmp_path):
    write_part(tmp_path / "inband", [_mined("m", 1, "money")], MINED_SCHEMA)
    with pytest.raises(ValueError, match="no mined false positives and no collapsed-topic tasks"):
        adversarial_pool(pools / "orig", tmp_path / "inband", tmp_path / "aux")
    write_part(tmp_path / "nopos", [_row("n", 0)])
    with pytest.raises(ValueError, match="no valid positive"):
        adversarial_pool(tmp_path / "nopos", pools / "mined", tmp_path / "aux2")
