"""RewardCurves: per-component curves, and the first-vs-last window table (did style or content move)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from propel.callbacks.reward_curves import RewardCurves, window_markdown, window_table
from propel.errors import ConfigError
from propel.lit_modules.state import RolloutState
from propel.rewards.combine import RewardBreakdown


def test_window_table_means_and_deltas():
    history = {"calibration": [(i, float(i)) for i in range(10)], "format": [(i, 1.0) for i in range(10)]}
    rows = {r["component"]: r for r in window_table(history, first=2, last=3)}
    cal = rows["calibration"]
    assert cal["first_mean"] == pytest.approx(0.5)  # steps 0, 1
    assert cal["last_mean"] == pytest.approx(8.0)  # steps 7, 8, 9
    assert cal["delta"] == pytest.approx(7.5) and cal["first_n"] == 2 and cal["last_n"] == 3
    assert cal["first_steps"] == [0, 1] and cal["last_steps"] == [7, 9]
    assert rows["format"]["delta"] == 0.0
    md = window_markdown(window_table(history, 2, 3))
    assert "| component | steps 1-2 | steps 8-10 | delta |" in md
    assert "| calibration | 0.500 | 8.000 | +7.500 |" in md and "overlap" not in md
    assert "overlap" in window_markdown(window_table(history, 8, 8))  # a short run says so


class _Module:
    rollout_state = None


def test_callback_records_steps_and_writes_windows_and_plots(tmp_path):
    cb = RewardCurves(str(tmp_path), first_window=2, last_window=2)
    module = _Module()
    trainer = SimpleNamespace(is_global_zero=True)
    for step in range(5):
        comps = {"parsimony": torch.tensor([step / 4, step / 4]), "resolution": torch.tensor([0.2, 0.2])}
        module.rollout_state = RolloutState(step, rewards=RewardBreakdown(torch.tensor([1.0, 1.0]), comps))
        cb.on_train_batch_end(trainer, module, None, None, step)
        cb.on_train_batch_end(trainer, module, None, None, step)  # the same state twice is recorded once
    assert [p[0] for p in cb.history["parsimony"]] == [0, 1, 2, 3, 4]
    restored = RewardCurves(str(tmp_path))
    restored.load_state_dict(cb.state_dict())
    assert restored.history == cb.history
    cb.on_train_end(trainer, module)
    table = json.loads((tmp_path / "reward_windows.json").read_text())
    rows = {r["component"]: r for r in table["rows"]}
    assert table["first_window"] == 2 and set(rows) == {"total", "parsimony", "resolution"}
    assert rows["parsimony"]["first_mean"] == pytest.approx(0.125) and rows["parsimony"]["last_mean"] == 0.875
    assert rows["resolution"]["delta"] == pytest.approx(0.0)
    assert "| parsimony | 0.125 | 0.875 | +0.750 |" in (tmp_path / "reward_windows.md").read_text()
    for name in ("reward_parsimony.png", "reward_resolution.png", "reward_components.png"):
        assert (tmp_path / name).stat().st_size > 1000
    with pytest.raises(ConfigError):
        RewardCurves(str(tmp_path), first_window=0)
    with pytest.raises(TypeError, match="rollout_state"):
        cb.on_train_batch_end(trainer, object(), None, None, 0)
