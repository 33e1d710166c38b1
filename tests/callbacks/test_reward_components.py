"""RewardComponentMonitor: each step's component shares, unscorable rate and skipped groups in
``reward_components.csv``, and one propel warning when a component carries nearly all the advantage variance."""

from __future__ import annotations

import csv
import logging
import re
from types import SimpleNamespace

import pytest
import torch

from propel.callbacks.reward_components import RewardComponentMonitor
from propel.errors import ConfigError
from propel.lit_modules.state import RolloutState, StepScoring
from propel.losses.advantage_shares import advantage_shares
from propel.rewards.combine import RewardBreakdown

WEIGHTS = {"format": 1.0, "content": 1.0, "monitor": 0.0}


class _Module:
    rollout_state = None


def _state(step: int, shares: dict[str, float], unscorable: int = 0, weights=WEIGHTS) -> RolloutState:
    rewards = RewardBreakdown(torch.zeros(8), {k: torch.zeros(8) for k in weights}, weights=dict(weights))
    scoring = StepScoring(samples=8, unscorable=unscorable, groups=2, skipped_groups=unscorable // 4, shares=shares)
    return RolloutState(step, rewards=rewards, scoring=scoring)


def _run(cb, states, rank_zero=True, root="."):
    trainer, module = SimpleNamespace(is_global_zero=rank_zero, default_root_dir=root), _Module()
    for i, state in enumerate(states):
        module.rollout_state = state
        cb.on_train_batch_end(trainer, module, None, None, i)
        cb.on_train_batch_end(trainer, module, None, None, i)  # the same state twice is recorded once


def _format_drowns_content() -> dict[str, float]:
    """Real shares: per group, the format term varies between completions; content differs only between prompts."""
    fmt = torch.tensor([1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0])
    content = torch.tensor([0.2, 0.2, 0.2, 0.21, 0.9, 0.9, 0.9, 0.9])
    shares = advantage_shares(torch.stack([fmt, content], dim=1), 4)
    return {"format": float(shares[0]), "content": float(shares[1])}


def test_a_dominant_component_is_written_each_step_and_warned_about_once(tmp_path, caplog):
    shares = _format_drowns_content()
    assert shares["format"] >= 0.95  # a format term the content never differs from within a prompt
    cb = RewardComponentMonitor(str(tmp_path), window=3)
    with caplog.at_level(logging.WARNING, logger="propel.callbacks.reward_components"):
        _run(cb, [_state(s, shares, unscorable=4 * (s == 1)) for s in range(5)])
    (record,) = caplog.records
    want = r"propel: reward component 'format' carries a 1\.00 share of the advantage variance over the last 3 steps"
    assert re.match(want, record.getMessage()), record.getMessage()
    rows = list(csv.DictReader((tmp_path / "reward_components.csv").open()))
    assert [r["step"] for r in rows] == ["0", "1", "2", "3", "4"]
    assert list(rows[0]) == ["step", "unscorable_rate", "skipped_groups", "share_format", "share_content"]
    assert float(rows[1]["unscorable_rate"]) == 0.5 and rows[1]["skipped_groups"] == "1"
    assert float(rows[0]["share_format"]) + float(rows[0]["share_content"]) == pytest.approx(1.0)
    resumed = RewardComponentMonitor(str(tmp_path), window=3)
    resumed.load_state_dict(cb.state_dict())
    with caplog.at_level(logging.WARNING, logger="propel.callbacks.reward_components"):
        _run(resumed, [_state(s, shares) for s in range(5, 8)])
    assert len(caplog.records) == 1  # said once per run, a resumed one included
    assert len(list(csv.DictReader((tmp_path / "reward_components.csv").open()))) == 8


def test_balanced_components_one_paying_component_and_other_ranks_stay_quiet(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="propel.callbacks.reward_components"):
        _run(
            RewardComponentMonitor(str(tmp_path / "a"), window=2),
            [_state(s, {"format": 0.6, "content": 0.4}) for s in range(4)],
        )
        alone = {"format": 1.0, "monitor": 0.0}
        _run(
            RewardComponentMonitor(str(tmp_path / "b"), window=2),
            [_state(s, {"format": 1.0}, weights=alone) for s in range(4)],
        )
        _run(
            RewardComponentMonitor(str(tmp_path / "c"), window=2),
            [_state(s, {"format": 0.99, "content": 0.01}) for s in range(4)],
            rank_zero=False,
        )
    assert not caplog.records and not (tmp_path / "c").exists()
    no_variance = RewardComponentMonitor(str(tmp_path / "d"), window=2)
    _run(no_variance, [_state(0, {}), _state(1, {"format": 0.99, "content": 0.01})])
    assert len(no_variance.recent) == 1  # a step without reward variance has no shares and fills no window
    assert list(csv.reader((tmp_path / "d/reward_components.csv").open()))[1][3:] == ["", ""]
    with pytest.raises(ConfigError):
        RewardComponentMonitor(threshold=0.4)
