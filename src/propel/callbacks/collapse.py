"""Mode-collapse detection during RL: Self-BLEU up, Distinct-n down, one topic taking over."""

from __future__ import annotations

import warnings

import lightning.pytorch as pl

from propel.errors import ConfigError
from propel.lit_modules.state import RolloutPublisher
from propel.metrics.diversity import distinct_n, self_bleu, top_topic_rate
from propel.rollouts.record import Sample

ACTIONS = ("warn", "stop")


class CollapseDetector(pl.Callback):
    """Every ``every_n_steps`` optimizer steps, measure the diversity of the policy's latest generations.

    Reads the module's ``rollout_state`` (a ``RolloutPublisher``, e.g. any ``LoRAPolicyModule``) and measures the
    paper's definitions over *all* generations (a malformed one as its raw completion), as evaluation reports
    them: ``collapse/self_bleu``, ``collapse/distinct``, ``collapse/top_topic`` (the thresholds apply to these),
    plus the same over valid samples only as ``collapse/self_bleu_valid``, ``collapse/distinct_valid``,
    ``collapse/top_topic_valid``. A metric without a value (Self-BLEU of fewer than 2 texts, no known topic) is
    not logged and breaches nothing. On a breach it warns or stops training (``trainer.should_stop``).

    Args:
        every_n_steps: check interval in optimizer steps.
        n: n-gram order for Self-BLEU and Distinct-n.
        self_bleu_max: breach when Self-BLEU-n exceeds this (None: never).
        distinct_min: breach when Distinct-n falls below this (None: never).
        top_topic_max: breach when the most common topic's share exceeds this (None: never).
        action: ``"warn"`` or ``"stop"``.
        min_samples: skip the check with fewer generations than this.
    """

    def __init__(
        self,
        every_n_steps: int = 10,
        n: int = 3,
        self_bleu_max: float | None = 0.8,
        distinct_min: float | None = 0.2,
        top_topic_max: float | None = 0.5,
        action: str = "warn",
        min_samples: int = 4,
    ) -> None:
        if action not in ACTIONS:
            raise ConfigError(f"action must be one of {ACTIONS}, got {action!r}")
        if every_n_steps < 1:
            raise ConfigError(f"every_n_steps must be >= 1, got {every_n_steps}")
        self.every_n_steps, self.n, self.action, self.min_samples = every_n_steps, n, action, max(2, min_samples)
        self.self_bleu_max, self.distinct_min, self.top_topic_max = self_bleu_max, distinct_min, top_topic_max
        self.last_metrics: dict[str, float] = {}
        self.breaches: list[str] = []
        self._last_checked_step = -1

    def measure(self, texts: list[str], topics: list[str | None] | None, suffix: str = "") -> dict[str, float]:
        """The collapse metrics of one batch of generations that have a value (keys end in ``suffix``)."""
        metrics = {
            f"collapse/self_bleu{suffix}": self_bleu(texts, self.n),
            f"collapse/distinct{suffix}": distinct_n(texts, self.n),
            f"collapse/top_topic{suffix}": top_topic_rate(topics) if topics else None,
        }
        return {k: v for k, v in metrics.items() if v is not None}

    def measure_samples(self, samples: list[Sample]) -> dict[str, float]:
        """The metrics over all samples, then over the valid ones (``_valid`` keys)."""
        valid = [s for s in samples if s.valid]
        metrics = self.measure([s.task_text for s in samples], [s.topic for s in samples])
        metrics.update(self.measure([s.task_text for s in valid], [s.topic for s in valid], "_valid"))
        return metrics

    def check(self, metrics: dict[str, float]) -> list[str]:
        """Human-readable descriptions of every threshold the metrics breach."""
        out = []
        sb, dn, tt = (metrics.get(f"collapse/{k}") for k in ("self_bleu", "distinct", "top_topic"))
        if self.self_bleu_max is not None and sb is not None and sb > self.self_bleu_max:
            out.append(f"Self-BLEU-{self.n} {sb:.3f} > {self.self_bleu_max}")
        if self.distinct_min is not None and dn is not None and dn < self.distinct_min:
            out.append(f"Distinct-{self.n} {dn:.3f} < {self.distinct_min}")
        if self.top_topic_max is not None and tt is not None and tt > self.top_topic_max:
            out.append(f"top-topic rate {tt:.3f} > {self.top_topic_max}")
        return out

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step == 0 or step % self.every_n_steps or step == self._last_checked_step:
            return
        if not isinstance(pl_module, RolloutPublisher):
            raise TypeError(f"CollapseDetector reads the module's `rollout_state`; {type(pl_module).__name__} has none")
        state = pl_module.rollout_state
        samples = state.samples if state is not None else []
        if len(samples) < self.min_samples:
            return
        self._last_checked_step = step
        self.last_metrics = self.measure_samples(samples)
        pl_module.log_dict(self.last_metrics, on_step=True, on_epoch=False)
        breaches = self.check(self.last_metrics)
        if not breaches:
            return
        message = f"mode collapse suspected at step {step}: " + "; ".join(breaches)
        self.breaches.append(message)
        if self.action == "stop":
            trainer.should_stop = True
            message += " -> stopping"
        warnings.warn(message, RuntimeWarning, stacklevel=2)

    def state_dict(self) -> dict:
        return {"breaches": list(self.breaches), "last_checked_step": self._last_checked_step}

    def load_state_dict(self, state_dict: dict) -> None:
        self.breaches = list(state_dict.get("breaches", []))
        self._last_checked_step = int(state_dict.get("last_checked_step", -1))
