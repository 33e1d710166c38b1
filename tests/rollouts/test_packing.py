"""Packing rollouts into training tensors: prompt + every later token, loss mask on assistant turns only."""

from __future__ import annotations

import torch

from propel.records import Sample, Turn
from propel.rollouts import pack

PAD = 0


def test_single_turn_layout_is_prompt_then_completion():
    a = Sample("p", "xy", prompt_ids=[5, 6, 7], turns=[Turn("assistant", "xy", [8, 9], [-0.5, -1.0])])
    b = Sample("q", "z", prompt_ids=[5], turns=[Turn("assistant", "z", [4], None)])
    batch = pack([a, b], torch.tensor([1.0, -1.0]), PAD)
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9], [5, 4, PAD, PAD, PAD]]
    assert batch.attention_mask.tolist() == [[1, 1, 1, 1, 1], [1, 1, 0, 0, 0]]
    assert batch.starts.tolist() == [3, 1]
    assert batch.response_ids.tolist() == [[8, 9], [4, PAD]]
    assert batch.loss_mask.tolist() == [[1.0, 1.0], [1.0, 0.0]]
    assert batch.turn_index.tolist() == [[0, 0], [0, -1]]
    assert batch.engine_logp[0].tolist() == [-0.5, -1.0] and batch.engine_logp[1].isnan().all()
    assert batch.advantages.tolist() == [1.0, -1.0]


def test_multi_turn_masks_observations_and_selects_one_turn():
    turns = [
        Turn("assistant", "call", [11, 12], [-0.1, -0.2]),
        Turn("tool", "result", [21, 22, 23], trainable=False),
        Turn("assistant", "answer", [13], [-0.3]),
    ]
    s = Sample("p", "call answer", prompt_ids=[1, 2], turns=turns)
    batch = pack([s], torch.tensor([0.5]), PAD)
    assert batch.input_ids.tolist() == [[1, 2, 11, 12, 21, 22, 23, 13]]
    assert batch.loss_mask.tolist() == [[1, 1, 0, 0, 0, 1]]
    assert batch.turn_index.tolist() == [[0, 0, 1, 1, 1, 2]]
    assert batch.turn_mask(2).tolist() == [[0, 0, 0, 0, 0, 1]]
    assert batch.turn_mask(1).sum() == 0  # an observation turn has nothing to train
    logp = batch.engine_logp[0]
    assert logp[:2].tolist() == [torch.tensor(-0.1).item(), torch.tensor(-0.2).item()] and logp[2:5].isnan().all()
    assert batch.select(torch.tensor([0])).input_ids.shape == batch.input_ids.shape
