"""Every step, the triage reward's safety quantity in both modes: the share of the batch's accepted answers with no
content and what they are paid relative to an honest answer (``propel.rewards.triage.integrity``)."""

from __future__ import annotations

import lightning.pytorch as pl

from propel.errors import ConfigError
from propel.lit_modules.state import RolloutPublisher
from propel.rewards.triage.integrity import HONEST_CONFIDENCE, integrity
from propel.rewards.triage.mode import MODES, check_mode


class TriageIntegrity(pl.Callback):
    """After each training batch, log ``train/integrity/<mode>/<key>`` for every mode of ``modes``:
    ``content_free_share`` (content-free accepted answers / accepted answers), ``content_free_reward`` (their mean
    total over the honest answer's on the same tickets; absent on a step without one), ``content_free_max`` (the
    largest such ratio of one answer) and ``honest_total`` (the honest answer's mean total), for the module's triage
    reward components at their weights, each in that mode: the mode being trained shows what it pays, the other what
    it would have paid the same answers. The cost is one more scoring of the batch per mode and one honest answer per
    distinct ticket (the content check is cached). Under a data-parallel strategy the figures are rank 0's share of
    the batch.

    Args:
        modes: the modes to report (default both: ``content_first`` and ``independent``).
        confidence: the confidence the honest answer states.
    """

    def __init__(self, modes: list[str] | None = None, confidence: float = HONEST_CONFIDENCE) -> None:
        self.modes = [check_mode(m, "TriageIntegrity") for m in (modes or list(MODES))]
        if not 0.0 <= confidence <= 1.0:
            raise ConfigError(f"TriageIntegrity confidence must be in [0, 1], got {confidence}")
        self.confidence = confidence
        self._last_state = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not isinstance(pl_module, RolloutPublisher) or getattr(pl_module, "reward", None) is None:
            name = type(pl_module).__name__
            raise TypeError(f"TriageIntegrity reads the module's `rollout_state` and `reward`; {name} has none")
        state = pl_module.rollout_state
        if state is None or not state.samples or state is self._last_state:
            return
        self._last_state = state
        report = integrity(pl_module.reward, state.samples, self.modes, self.confidence)
        metrics = {f"train/integrity/{mode}/{k}": v for mode, stats in report.items() for k, v in stats.items()}
        pl_module.log_dict(metrics, on_step=True, batch_size=len(state.samples))
