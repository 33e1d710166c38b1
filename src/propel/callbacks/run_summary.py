"""A run's summary in its folder: what ran, and how a chosen set of logged metrics moved from the first steps to
the last.

The distillation and agent demos log their evidence (the targeted divergence next to the control's, the drift
matrix, the solved rate) per step to W&B only; ``RunSummary`` keeps the same values and writes them next to the
checkpoints at the end of fitting, with the first-vs-last window table of ``propel.callbacks.reward_curves`` and one
figure.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence

import lightning.pytorch as pl
import torch

from propel.callbacks.reward_curves import window_markdown, window_table
from propel.errors import ConfigError


def _scalar(value) -> float | None:
    """A logged value as a float: a one-element tensor or a number; None for anything else."""
    if isinstance(value, torch.Tensor):
        return float(value.detach().reshape(-1)[0]) if value.numel() == 1 else None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def _same_value_object(a, b) -> bool:
    """Whether two entries of ``trainer.callback_metrics`` are the same logged value: Lightning clones every value
    ``self.log`` receives and hands out detached views of that clone, so a metric not logged again since ``b`` was
    read still points at ``b``'s memory (kept alive by the reference held to ``b``, so no new value can reuse it)."""
    if a is b:
        return True
    return (
        isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.numel() > 0 and a.data_ptr() == b.data_ptr()
    )


def _moved(fell_by: float) -> str:
    """A fall in words a reader cannot misread next to the table's signed delta: "fell by 0.1", "rose by 0.2"."""
    if fell_by == 0:
        return "did not move"
    return f"{'fell' if fell_by > 0 else 'rose'} by {abs(fell_by):.3g}"


class RunSummary(pl.Callback):
    """After every optimizer step, record the value of each of ``metrics`` (names as logged: ``train/loss``,
    ``train/distill/divergence``, ...) that the step logged; at the end of fitting write into ``dirpath``, from rank
    0: ``summary.json`` (what ran, every recorded point, the window table), ``summary.md`` (the module's class, the
    steps, per metric the mean over the first ``first_window`` and the last ``last_window`` recorded steps and the
    delta, and with ``target`` and ``control`` one line saying whether the target fell more than the control) and
    ``summary.png`` (one panel per metric over the optimizer steps).

    A metric the step did not log (absent from ``trainer.callback_metrics``, or still holding an earlier step's value)
    is skipped for that step, and so is every metric of a batch that took no optimizer step. Steps are 0-based
    optimizer steps (``trainer.global_step`` before the step), so the table's "steps 1-10" are the first ten updates.
    The recorded points are part of the checkpoint: a resumed run keeps its first window.

    Args:
        dirpath: the run folder the files go to (``${trainer.default_root_dir}`` in the configs).
        metrics: the logged names to record, in the order of the table and the figure.
        first_window: recorded steps in the first window (cut to half the recorded steps on a shorter run).
        last_window: recorded steps in the last window (likewise).
        target: a metric of ``metrics`` expected to fall (``train/distill/divergence``); with ``control``.
        control: the metric it is compared with (``train/distill/control_divergence``: the same divergence with an
            unrelated hint); the summary says whether ``target`` fell more than ``control``, first window to last.
    """

    def __init__(
        self,
        dirpath: str,
        metrics: Sequence[str],
        first_window: int = 3,
        last_window: int = 3,
        target: str | None = None,
        control: str | None = None,
    ) -> None:
        if isinstance(metrics, str):
            raise ConfigError(f"metrics must be a list of logged metric names, got the string {metrics!r}")
        metrics = list(metrics)
        if not metrics:
            raise ConfigError("metrics must name at least one logged metric (e.g. train/loss)")
        if not all(isinstance(m, str) and m for m in metrics):
            raise ConfigError(f"metrics must be non-empty strings, got {metrics}")
        if len(set(metrics)) != len(metrics):
            raise ConfigError(f"metrics must be unique, got {metrics}")
        if first_window < 1 or last_window < 1:
            raise ConfigError(f"first_window and last_window must be >= 1, got {first_window}, {last_window}")
        if (target is None) != (control is None):
            raise ConfigError(f"target and control go together, got target={target!r}, control={control!r}")
        for name in (target, control):
            if name is not None and name not in metrics:
                raise ConfigError(f"{name!r} (target/control) must be one of metrics {metrics}")
        if target is not None and target == control:
            raise ConfigError(f"target and control must differ, got {target!r} for both")
        self.dirpath, self.metrics = dirpath, metrics
        self.first_window, self.last_window = first_window, last_window
        self.target, self.control = target, control
        self.history: dict[str, list[tuple[int, float]]] = {}
        self.non_finite: dict[str, int] = {}
        """Per metric, the steps whose logged value was NaN or infinite (counted, not recorded)."""
        self._before: dict = {}
        self._step_before: int | None = None

    # ------------------------------------------------------------------------------------------------ recording
    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
        seen = trainer.callback_metrics
        self._before = {name: seen[name] for name in self.metrics if name in seen}
        self._step_before = trainer.global_step

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        before, step = self._before, self._step_before
        self._before, self._step_before = {}, None
        if step is None or trainer.global_step == step:  # no optimizer step in this batch
            return
        seen = trainer.callback_metrics
        for name in self.metrics:
            if name not in seen or (name in before and _same_value_object(seen[name], before[name])):
                continue  # not logged at this step
            value = _scalar(seen[name])
            if value is None:
                continue
            if not math.isfinite(value):
                self.non_finite[name] = self.non_finite.get(name, 0) + 1
                continue
            points = [p for p in self.history.get(name, []) if p[0] < step]  # a step redone after a resume
            self.history[name] = points + [(step, value)]

    def state_dict(self) -> dict:
        """The recorded points (a resumed run keeps its first window)."""
        return {
            "history": {k: [list(p) for p in v] for k, v in self.history.items()},
            "non_finite": dict(self.non_finite),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        self.history = {k: [(int(x), float(y)) for x, y in v] for k, v in state_dict.get("history", {}).items()}
        self.non_finite = {k: int(v) for k, v in state_dict.get("non_finite", {}).items()}

    # ------------------------------------------------------------------------------------------------ summary
    def steps(self) -> list[int]:
        """The optimizer steps at which any metric was recorded."""
        return sorted({s for points in self.history.values() for s, _ in points})

    def effective_windows(self) -> tuple[int, int]:
        """``first_window`` and ``last_window``, each cut to half the recorded steps (at least 1) on a run shorter
        than both together: a 3-step demo compares step 1 with step 3 rather than two overlapping windows."""
        n = len(self.steps())
        if n >= self.first_window + self.last_window:
            return self.first_window, self.last_window
        half = max(1, n // 2)
        return min(self.first_window, half), min(self.last_window, half)

    def windows(self) -> list[dict]:
        """The first-vs-last window table over the recorded metrics, in ``metrics`` order."""
        ordered = {name: self.history[name] for name in self.metrics if self.history.get(name)}
        return window_table(ordered, *self.effective_windows())

    def comparison(self, rows: list[dict]) -> dict | None:
        """With ``target`` and ``control``: how much each fell from the first window to the last (first mean minus
        last mean) and whether the target fell more (it fell, and by more than the control: a target that rose less
        than the control did not fall); None without them, or when either was never recorded."""
        if self.target is None:
            return None
        by_name = {r["component"]: r for r in rows}
        if self.target not in by_name or self.control not in by_name:
            return None
        fell = {name: -by_name[name]["delta"] for name in (self.target, self.control)}
        return {
            "target": self.target,
            "control": self.control,
            "target_fell_by": fell[self.target],
            "control_fell_by": fell[self.control],
            "target_fell_more": fell[self.target] > max(fell[self.control], 0.0),
        }

    def comparison_line(self, comparison: dict | None) -> str | None:
        if self.target is None:
            return None
        if comparison is None:
            missing = [n for n in (self.target, self.control) if not self.history.get(n)]
            return f"No comparison of `{self.target}` with `{self.control}`: {', '.join(missing)} never recorded."
        verdict = "fell more than" if comparison["target_fell_more"] else "did not fall more than"
        target, control = (_moved(comparison[k]) for k in ("target_fell_by", "control_fell_by"))
        return (
            f"`{self.target}` {target} and `{self.control}` {control} (first window to last): the targeted divergence "
            f"{verdict} the control's."
        )

    def markdown(self, module: str, global_step: int, max_steps: int | None, rows: list[dict], line: str | None) -> str:
        first, last = self.effective_windows()
        cut = "" if (first, last) == (self.first_window, self.last_window) else " (cut to fit the run)"
        out = [
            "# Run summary",
            "",
            f"- module: `{module}`",
            f"- optimizer steps: {global_step}" + (f" of max_steps {max_steps}" if max_steps and max_steps > 0 else ""),
            f"- steps recorded: {len(self.steps())}; windows: first {first}, last {last}{cut}",
            "",
            window_markdown(rows).replace("| component |", "| metric |", 1) if rows else "(no metric recorded)\n",
        ]
        if len({(tuple(r["first_steps"]), tuple(r["last_steps"])) for r in rows}) > 1:
            out.append(
                "Metrics logged at different steps: each row's windows are its own first and last recorded steps "
                "(`summary.json` lists them).\n"
            )
        never = [m for m in self.metrics if not self.history.get(m)]
        if never:
            out.append("Never logged: " + ", ".join(f"`{m}`" for m in never) + "\n")
        if self.non_finite:
            counts = ", ".join(f"`{k}` {v}" for k, v in sorted(self.non_finite.items()))
            out.append(f"Non-finite values left out (steps): {counts}\n")
        if line:
            out.append(line + "\n")
        return "\n".join(out)

    def on_train_end(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero:
            return
        module = f"{type(pl_module).__module__}.{type(pl_module).__qualname__}"
        rows = self.windows()
        comparison = self.comparison(rows)
        line = self.comparison_line(comparison)
        os.makedirs(self.dirpath, exist_ok=True)
        summary = {
            "module": module,
            "global_step": trainer.global_step,
            "max_steps": trainer.max_steps,
            "metrics": self.metrics,
            "first_window": self.first_window,
            "last_window": self.last_window,
            "windows_used": list(self.effective_windows()),
            "rows": rows,
            "comparison": comparison,
            "history": {k: [list(p) for p in v] for k, v in self.history.items()},
            "non_finite": self.non_finite,
        }
        with open(os.path.join(self.dirpath, "summary.json"), "w") as f:
            json.dump(summary, f, indent=1)
        with open(os.path.join(self.dirpath, "summary.md"), "w") as f:
            f.write(self.markdown(module, trainer.global_step, trainer.max_steps, rows, line))
        self._plot(module)

    def _plot(self, module: str) -> None:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import MaxNLocator

        names = [m for m in self.metrics if self.history.get(m)] or self.metrics[:1]
        cols = min(2, len(names))
        nrows = math.ceil(len(names) / cols)
        fig, axes = plt.subplots(nrows, cols, figsize=(5 * cols, 2.8 * nrows), squeeze=False)
        for ax, name in zip(axes.flat, names, strict=False):
            points = self.history.get(name, [])
            ax.plot([s + 1 for s, _ in points], [v for _, v in points], marker="o", markersize=3)
            ax.set_title(name, fontsize=9)
            ax.set_xlabel("optimizer step", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        for ax in list(axes.flat)[len(names) :]:
            ax.axis("off")
        fig.suptitle(module.rsplit(".", 1)[-1], fontsize=10)
        fig.tight_layout()
        fig.savefig(os.path.join(self.dirpath, "summary.png"), dpi=80)
        plt.close(fig)
