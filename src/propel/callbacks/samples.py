"""A W&B table of the tasks the policy sampled, with their rewards: what the numbers on the curves look like; and the
same rows as a local file (JSON lines), for a run without W&B or a quick look with ``tail``."""

from __future__ import annotations

import json
from pathlib import Path

import lightning.pytorch as pl

from propel.errors import ConfigError
from propel.lit_modules.state import RolloutPublisher

COLUMNS = ("step", "prompt_tail", "completion", "valid", "topic", "reward")


class SampleTable(pl.Callback):
    """Every ``every_n_steps`` optimizer steps, log the latest rollouts as a table (rank 0, loggers with ``log_text``).

    The interval continues across a resume (no table right after it unless a multiple is crossed). Reads the
    module's ``rollout_state`` (a ``RolloutPublisher``, e.g. any ``LoRAPolicyModule``): its samples and
    their ``RewardBreakdown``. One column per reward component follows ``reward``. Under a data-parallel strategy
    the table holds rank 0's share of the batch (each rank keeps its own rollouts; the reward statistics on the
    curves are the whole batch's).

    Args:
        every_n_steps: logging interval in optimizer steps.
        max_rows: rows per table (the first ``max_rows`` samples of the batch, whole groups first).
        key: the table's name in W&B.
        prompt_chars: trailing characters of the prompt to show (few-shot prompts are long and repetitive).
        info_keys: ``sample.info`` entries to show as extra columns, dotted for nested ones (e.g.
            ``test_suite.flags``, ``test_suite.reason``: the test-suite reward's hack flags and verdict).
        file: also append the rows to this JSON-lines file (one object per sample: the columns as keys), e.g.
            ``${trainer.default_root_dir}/samples.jsonl``; None: the table only.
    """

    def __init__(
        self,
        every_n_steps: int = 10,
        max_rows: int = 32,
        key: str = "samples",
        prompt_chars: int = 200,
        info_keys: list[str] | None = None,
        file: str | None = None,
    ):
        if every_n_steps < 1 or max_rows < 1:
            raise ConfigError(f"every_n_steps and max_rows must be >= 1, got {every_n_steps}, {max_rows}")
        self.every_n_steps, self.max_rows, self.key, self.prompt_chars = every_n_steps, max_rows, key, prompt_chars
        self.info_keys = list(info_keys or [])
        self.file = file
        self._last_step = -1

    def rows(self, step: int, samples, breakdown) -> tuple[list[str], list[list]]:
        """Table columns and rows for one batch of scored samples."""
        names = list(breakdown.components) if breakdown is not None else []
        columns = [*COLUMNS, *names, *self.info_keys]
        data = []
        for i, s in enumerate(samples[: self.max_rows]):
            total = float(breakdown.total[i]) if breakdown is not None else None
            parts = [float(breakdown.components[n][i]) for n in names]
            extra = [_info_text(s.info, k) for k in self.info_keys]
            row = [step, s.prompt[-self.prompt_chars :], s.completion, bool(s.valid), s.topic, total, *parts, *extra]
            data.append(row)
        return columns, data

    def on_train_start(self, trainer, pl_module) -> None:
        if trainer.global_step:  # resumed: the interval continues from the checkpoint's step
            self._last_step = max(self._last_step, trainer.global_step)

    def state_dict(self) -> dict:
        return {"last_step": self._last_step}

    def load_state_dict(self, state_dict: dict) -> None:
        self._last_step = int(state_dict.get("last_step", -1))

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        crossed = step // self.every_n_steps > max(self._last_step, 0) // self.every_n_steps
        if not crossed or not trainer.is_global_zero:
            return
        if not isinstance(pl_module, RolloutPublisher):
            raise TypeError(f"SampleTable reads the module's `rollout_state`; {type(pl_module).__name__} has none")
        state = pl_module.rollout_state
        if state is None or not state.samples:
            return
        self._last_step = step
        columns, data = self.rows(step, state.samples, state.rewards)
        for logger in trainer.loggers:
            if hasattr(logger, "log_text"):
                logger.log_text(key=self.key, columns=columns, data=data, step=step)
        if self.file:
            path = Path(self.file)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as f:
                for row in data:
                    f.write(json.dumps(dict(zip(columns, row, strict=True)), default=str) + "\n")


def _info_text(info: dict, key: str) -> str:
    """``info[a][b]`` for ``key="a.b"`` as text (lists joined with commas; empty when absent)."""
    value = info
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    if value is None:
        return ""
    return ",".join(map(str, value)) if isinstance(value, list | tuple) else str(value)
