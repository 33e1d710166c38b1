"""Sample tables: one row per sampled task with its total and per-component rewards."""

from __future__ import annotations

import pytest
import torch

from propel.callbacks.samples import SampleTable
from propel.rewards import RewardBreakdown
from propel.rollouts import Sample


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
