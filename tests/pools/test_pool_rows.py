"""One pool row per scored sample, for every writer (labeling, evaluation, mining), and the solver settings."""

from __future__ import annotations

import json

import pytest

from propel.domains.trials import SolverSpec, Trials
from propel.errors import ConfigError
from propel.pools import MINED_SCHEMA, SCHEMA, from_record, pool_row, read_pool, write_part
from propel.records import Context, Prompt, Sample, Task

CTX = Context(id="c-1", prompt=Prompt(text="Write a task:"), group="g")


def test_rows_of_valid_and_invalid_samples(tmp_path):
    task = Task("d", {"x": 1})
    valid = Sample("Write a task:", "x=1", valid=True, task=task, topic="t", info={"reason": "ok"}, context=CTX)
    other = Context(id="c-2", prompt=CTX.prompt, group="g")
    invalid = Sample("Write a task:", "??", valid=False, info={"reason": "no_task"}, context=other)
    row = pool_row(valid, "d", 4, Trials([True, False, True, False], 12), band=(1, 2))
    assert row["id"] == "c-1" and row["group"] == "g"
    assert json.loads(row["context"]) == {"text": "Write a task:", "messages": None}
    assert row["solve_count"] == 2 and row["label"] == 1 and row["topic"] == "t" and row["solver_tokens"] == 12
    bad = pool_row(invalid, "d", 4)
    assert bad["task"] is None and bad["reason"] == "no_task" and bad["label"] is None and bad["topic"] is None
    write_part(tmp_path, [row, bad])
    back = [from_record(r) for r in read_pool(tmp_path).to_dict("records")]
    assert back == [row, bad] and list(back[0]) == SCHEMA.names
    mined = pool_row(valid, "d", 4, Trials([False] * 4, 3), band=(1, 2), id="mined-3-0", probe_logit=2.5, step=3)
    write_part(tmp_path / "mined", [mined], MINED_SCHEMA)
    assert read_pool(tmp_path / "mined")["probe_logit"].tolist() == [2.5]
    with pytest.raises(ValueError, match="context"):
        pool_row(Sample("p", "c"), "d", 4)
    with pytest.raises(ValueError, match="band"):
        pool_row(valid, "d", 4, Trials([True], 1))


def test_solver_spec_validates_and_builds_sampling():
    spec = SolverSpec(n_trials=4, band=[1, 3], max_new_tokens=8, temperature=0.7)
    assert spec.band == (1, 3)
    sampling = spec.sampling(["\n"])
    assert (sampling.n, sampling.max_new_tokens, sampling.temperature, sampling.stop) == (4, 8, 0.7, ["\n"])
    with pytest.raises(ConfigError, match="band"):
        SolverSpec(n_trials=4, band=(1, 5))
    with pytest.raises(ConfigError, match="n_trials"):
        SolverSpec(n_trials=0)
