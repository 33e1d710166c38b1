"""Mode-collapse and degeneration detection during RL: Self-BLEU up, Distinct-n down, one topic or template taking
over, degenerate tasks, copies of the in-context examples, answers shrinking (``propel.metrics.degeneration``)."""

from __future__ import annotations

import logging
from pathlib import Path

import lightning.pytorch as pl

from propel.domains.interface import DEGENERATE
from propel.durable import write_json
from propel.errors import ConfigError
from propel.lit_modules.state import RolloutPublisher
from propel.metrics.degeneration import (
    answer_magnitudes,
    copies_context,
    distinct_templates,
    quantile,
    top_template_share,
)
from propel.metrics.diversity import distinct_n, self_bleu, top_topic_rate
from propel.records import Sample

log = logging.getLogger(__name__)
ACTIONS = ("warn", "stop")
ALARMS = "collapse_alarms.json"
"""Every alarm of the run, in the trainer's root folder (a list of messages, rewritten at each new one)."""
DRIFTING = {"monitor/degenerate": 1, "monitor/copies": 1, "monitor/distinct_templates": -1,
            "monitor/top_template": 1, "monitor/top_topic": 1}  # fmt: skip
"""The degeneration shares (and their ``_<reason>`` variants) whose drift from the run's start is an alarm, with the
direction that is degeneration (+1: rising; -1: falling, as fewer distinct templates): a generator that becomes more
diverse or less degenerate than it started is not an alarm."""


def _degeneration_direction(key: str) -> int:
    """+1 / -1: the direction in which ``key`` degenerates (``DRIFTING``); 0: not a drifting share."""
    return next((sign for name, sign in DRIFTING.items() if key.startswith(name)), 0)


def degenerate_reason(sample: Sample) -> str | None:
    """Why the domain's degeneracy rule flags a sample (strict: its invalid reason; lenient: ``info``), or None."""
    reason = sample.info.get("reason")
    if isinstance(reason, str) and reason.startswith(DEGENERATE):
        return reason.removeprefix(DEGENERATE)
    return sample.info.get("degenerate")


def monitor_flags(sample: Sample) -> list[str]:
    """What the degeneration monitors flag in one parsed sample: ``degenerate:<reason>``, ``copy``."""
    flags = []
    why = degenerate_reason(sample)
    if why:
        flags.append(DEGENERATE + why)
    if sample.task is not None and copies_context(sample.task_text, sample.prompt):
        flags.append("copy")
    return flags


def degeneration(samples: list[Sample]) -> dict[str, float]:
    """The degeneration monitors over the samples that parsed into a task (none logged when none did)."""
    parsed = [s for s in samples if s.task is not None]
    if not parsed:
        return {}
    n = len(parsed)
    reasons = [degenerate_reason(s) for s in parsed]
    out = {"monitor/degenerate": sum(r is not None for r in reasons) / n}
    for reason in sorted({r for r in reasons if r}):
        out[f"monitor/degenerate_{reason}"] = reasons.count(reason) / n
    out["monitor/copies"] = sum(copies_context(s.task_text, s.prompt) for s in parsed) / n
    texts = [s.task_text for s in parsed]
    for key, value in (("distinct_templates", distinct_templates(texts)), ("top_template", top_template_share(texts))):
        if value is not None:
            out[f"monitor/{key}"] = value
    topic = top_topic_rate([s.topic for s in parsed])
    if topic is not None:
        out["monitor/top_topic"] = topic
    sizes = answer_magnitudes([s.task.data.get("answer") for s in parsed if isinstance(s.task.data, dict)])
    for name, q in (("q10", 0.1), ("median", 0.5), ("q90", 0.9)):
        if sizes:
            out[f"monitor/answer_log10_{name}"] = quantile(sizes, q)
    return out


class CollapseDetector(pl.Callback):
    """Every ``every_n_steps`` optimizer steps, measure the diversity of the policy's latest generations.

    Reads the module's ``rollout_state`` (a ``RolloutPublisher``, e.g. any ``LoRAPolicyModule``) and measures the
    paper's definitions over *all* generations (a malformed one as its raw completion), as evaluation reports
    them: ``collapse/self_bleu``, ``collapse/distinct``, ``collapse/top_topic`` (the thresholds apply to these),
    plus the same over valid samples only as ``collapse/self_bleu_valid``, ``collapse/distinct_valid``,
    ``collapse/top_topic_valid``. A metric without a value (Self-BLEU of fewer than 2 texts, no known topic) is
    not logged and breaches nothing. On a breach it logs one line (``propel: mode collapse ...``, through propel's
    logger on rank 0, as propel's other messages print) and, with ``stop``, stops training (``trainer.should_stop``).

    Degeneration monitors, over the samples whose completion parsed into a task: ``monitor/degenerate`` (the share a
    domain's degeneracy rule flags, ``Domain.degeneracy``, whether strict validity made them invalid or not) and
    ``monitor/degenerate_<reason>`` per reason, ``monitor/copies`` (a task repeating a line of its own prompt's
    in-context examples), ``monitor/distinct_templates`` and ``monitor/top_template`` (numbers masked),
    ``monitor/top_topic`` (as ``collapse/top_topic``), and the answer-size distribution (``monitor/answer_log10_q10``,
    ``_median``, ``_q90``, of ``log10(1 + |answer|)``). The first check's values are the run's start; a later check
    where a share moved more than ``drift_max`` from it towards degeneration (``DRIFTING``) is an alarm (``warn`` or
    ``stop`` as above).

    Args:
        every_n_steps: check interval in optimizer steps.
        n: n-gram order for Self-BLEU and Distinct-n.
        self_bleu_max: breach when Self-BLEU-n exceeds this (None: never).
        distinct_min: breach when Distinct-n falls below this (None: never).
        top_topic_max: breach when the most common topic's share exceeds this (None: never).
        action: ``"warn"`` or ``"stop"``.
        min_samples: skip the check with fewer generations than this.
        drift_max: alarm when a degeneration share (``DRIFTING``) moves more than this from its first value (None:
            never).
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
        drift_max: float | None = 0.2,
    ) -> None:
        if action not in ACTIONS:
            raise ConfigError(f"action must be one of {ACTIONS}, got {action!r}")
        if every_n_steps < 1:
            raise ConfigError(f"every_n_steps must be >= 1, got {every_n_steps}")
        self.every_n_steps, self.n, self.action, self.min_samples = every_n_steps, n, action, max(2, min_samples)
        self.self_bleu_max, self.distinct_min, self.top_topic_max = self_bleu_max, distinct_min, top_topic_max
        self.drift_max = drift_max
        self.last_metrics: dict[str, float] = {}
        self.start_metrics: dict[str, float] = {}
        """The first check's degeneration shares: where the run started."""
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
        """The metrics over all samples, then over the valid ones (``_valid`` keys), then the degeneration monitors."""
        valid = [s for s in samples if s.valid]
        metrics = self.measure([s.task_text for s in samples], [s.topic for s in samples])
        metrics.update(self.measure([s.task_text for s in valid], [s.topic for s in valid], "_valid"))
        metrics.update(degeneration(samples))
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
        if self.drift_max is not None:
            for key, start in self.start_metrics.items():
                now = metrics.get(key)
                if now is not None and _degeneration_direction(key) * (now - start) > self.drift_max:
                    out.append(f"{key} {start:.3f} -> {now:.3f} ({now - start:+.3f}, beyond {self.drift_max})")
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
        first = not self.start_metrics
        for key, value in self.last_metrics.items():  # the first check is where the run starts; a degenerate
            if _degeneration_direction(key) and key not in self.start_metrics:  # reason first seen later started at 0
                self.start_metrics[key] = value if first or not key.startswith("monitor/degenerate_") else 0.0
        pl_module.log_dict(self.last_metrics, on_step=True, on_epoch=False)
        breaches = self.check(self.last_metrics)
        if not breaches:
            return
        message = f"propel: mode collapse or degeneration suspected at step {step}: " + "; ".join(breaches)
        self.breaches.append(message)
        if trainer.is_global_zero:  # the run folder keeps every alarm (the pipeline's report reads it)
            write_json(Path(trainer.default_root_dir) / ALARMS, self.breaches, indent=1)
        if self.action == "stop":
            trainer.should_stop = True
            message += " -> stopping"
        if trainer.is_global_zero:  # one line, as propel's other messages print (a logger, not a warning)
            log.warning(message)

    def state_dict(self) -> dict:
        return {
            "breaches": list(self.breaches),
            "last_checked_step": self._last_checked_step,
            "start_metrics": dict(self.start_metrics),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        self.breaches = list(state_dict.get("breaches", []))
        self.start_metrics = dict(state_dict.get("start_metrics", {}))
        self._last_checked_step = int(state_dict.get("last_checked_step", -1))
