"""Sample tables: one row per sampled task with its total and per-component rewards."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from propel.callbacks.samples import SampleTable
from propel.lit_modules.state import RolloutState
from propel.records import Sample
from propel.rewards import RewardBreakdown


def test_rows_hold_rewards_per_component():
    samples = [Sample("p" * 300, "task one", True, topic="add"), Sample("q", "junk", False)]
    breakdown = RewardBreakdown(
        total=torch.tensor([0.7, -1.0]),
        components={"probe": torch.tensor([0.7, -1.0]), "len": torch.tensor([2.0, 1.0])},
    )
    columns, data = SampleTable(prompt_chars=10, max_rows=5).rows(4, samples, breakdown)
    assert columns == ["step", "prompt_tail", "completion", "valid", "topic", "reward", "probe", "len"]
    assert data[0] == [4, "p" * 10, "task one", True, "add", pytest.approx(0.7), pytest.approx(0.7), 2.0]
    assert data[1][3:6] == [False, None, -1.0]
    assert len(SampleTable(max_rows=1).rows(4, samples, breakdown)[1]) == 1


def test_bad_interval():
    with pytest.raises(ValueError, match="every_n_steps"):
        SampleTable(every_n_steps=0)


class _Logger:
    def __init__(self):
        self.steps: list[int] = []

    def log_text(self, key, columns, data, step):
        self.steps.append(step)


def test_table_interval_continues_across_a_resume():
    """No off-interval table right after a resume (with or without the callback's state)."""
    logger = _Logger()
    module = SimpleNamespace(rollout_state=RolloutState(step=0, samples=[Sample("p", "c", True)], rewards=None))

    def run(table: SampleTable, start: int, stop: int) -> None:
        trainer = SimpleNamespace(global_step=start, is_global_zero=True, loggers=[logger])
        table.on_train_start(trainer, module)
        for step in range(start + 1, stop + 1):
            trainer.global_step = step
            table.on_train_batch_end(trainer, module, None, None, 0)

    first = SampleTable(every_n_steps=10)
    run(first, 0, 25)
    assert logger.steps == [10, 20]
    resumed = SampleTable(every_n_steps=10)
    resumed.load_state_dict(first.state_dict())
    run(resumed, 25, 31)
    run(SampleTable(every_n_steps=10), 31, 35)  # a checkpoint without the table's state
    assert logger.steps == [10, 20, 30]


def test_rows_go_to_a_local_file_too(tmp_path):
    """With ``file``, every logged table's rows are appended as JSON lines (what a run without W&B shows)."""
    import json

    module = SimpleNamespace(rollout_state=RolloutState(step=0, samples=[Sample("p", "c", True)], rewards=None))
    path = tmp_path / "run" / "samples.jsonl"
    table = SampleTable(every_n_steps=1, file=str(path))
    trainer = SimpleNamespace(global_step=0, is_global_zero=True, loggers=[])
    table.on_train_start(trainer, module)
    for step in (1, 2):
        trainer.global_step = step
        table.on_train_batch_end(trainer, module, None, None, 0)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2] and rows[0]["completion"] == "c" and rows[0]["valid"] is True
