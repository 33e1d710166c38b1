"""Per-component reward curves and the first-vs-last window table: what RL moved, one component at a time.

The triage evaluation compares each component's mean over the first steps (the base policy, before any
meaningful gradient) with its mean over the last steps (the trained policy): the question is whether style terms
(format, calibration, parsimony) move while the content term (resolution: extraction from the retrieved runbook)
does not. ``window_table`` computes that table from the recorded curves; ``RewardCurves`` writes it with the plots
at the end of fitting.
"""

from __future__ import annotations

import json
import os

import lightning.pytorch as pl
import torch

from propel.errors import ConfigError
from propel.lit_modules.state import RolloutPublisher


def window_table(history: dict[str, list[tuple[int, float]]], first: int, last: int) -> list[dict]:
    """Per component: mean over its first ``first`` points, mean over its last ``last`` points, and the delta.

    On a run shorter than ``first + last`` points the windows overlap (each is cut to the run's length); the rows
    say how many points each window holds (``first_n``, ``last_n``) and which steps (``first_steps``, ``last_steps``).
    """
    rows = []
    for name, points in history.items():
        if not points:
            continue
        head, tail = points[:first], points[-last:]
        first_mean = sum(v for _, v in head) / len(head)
        last_mean = sum(v for _, v in tail) / len(tail)
        rows.append(
            {
                "component": name,
                "first_mean": first_mean,
                "last_mean": last_mean,
                "delta": last_mean - first_mean,
                "first_n": len(head),
                "last_n": len(tail),
                "first_steps": [head[0][0], head[-1][0]],
                "last_steps": [tail[0][0], tail[-1][0]],
            }
        )
    return rows


def window_markdown(rows: list[dict]) -> str:
    """The table as Markdown (steps are 1-based training batches, as in the triage evaluation's "steps 1-10")."""
    if not rows:
        return "(no reward recorded)\n"
    f, t = rows[0]["first_steps"], rows[0]["last_steps"]
    lines = [
        f"| component | steps {f[0] + 1}-{f[1] + 1} | steps {t[0] + 1}-{t[1] + 1} | delta |",
        "| --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(f"| {r['component']} | {r['first_mean']:.3f} | {r['last_mean']:.3f} | {r['delta']:+.3f} |")
    if rows[0]["first_steps"][1] >= rows[0]["last_steps"][0]:
        lines.append("\n(the windows overlap: the run is shorter than the two windows together)")
    return "\n".join(lines) + "\n"


class RewardCurves(pl.Callback):
    """After every optimizer step, record the mean of the total reward and of each component; at the end of fitting
    write into ``dirpath``: ``reward_curves.json``, one PNG per component (``reward_<name>.png``), all components in
    one figure (``reward_components.png``, the triage evaluation's figure), and the first-vs-last window table
    (``reward_windows.json`` and ``reward_windows.md``: component, first-window mean, last-window mean, delta).

    Args:
        dirpath: the run folder the files go to.
        first_window: steps in the first window (the seed: steps 1-10).
        last_window: steps in the last window (the seed: the last 50).
    """

    def __init__(self, dirpath: str, first_window: int = 10, last_window: int = 50) -> None:
        if first_window < 1 or last_window < 1:
            raise ConfigError(f"first_window and last_window must be >= 1, got {first_window}, {last_window}")
        self.dirpath, self.first_window, self.last_window = dirpath, first_window, last_window
        self.history: dict[str, list[tuple[int, float]]] = {}
        self._last_state = None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if not isinstance(pl_module, RolloutPublisher):
            raise TypeError(f"RewardCurves reads the module's `rollout_state`; {type(pl_module).__name__} has none")
        state = pl_module.rollout_state
        if state is None or state.rewards is None or state is self._last_state:
            return
        self._last_state = state
        parts = {"total": state.rewards.total, **state.rewards.components}
        for name, value in parts.items():  # x: the batch's index (a batch with no optimizer step keeps its step)
            judged = value.float()[torch.isfinite(value.float())]  # over the samples it judged (NaN: it did not)
            if judged.numel():
                self.history.setdefault(name, []).append((batch_idx, float(judged.mean())))

    def state_dict(self) -> dict:
        """The recorded curves (a resumed run keeps its first window)."""
        return {"history": {k: [list(p) for p in v] for k, v in self.history.items()}}

    def load_state_dict(self, state_dict: dict) -> None:
        self.history = {k: [(int(x), float(y)) for x, y in v] for k, v in state_dict.get("history", {}).items()}

    def windows(self) -> list[dict]:
        return window_table(self.history, self.first_window, self.last_window)

    def on_train_end(self, trainer, pl_module) -> None:
        if not trainer.is_global_zero or not self.history:
            return
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        os.makedirs(self.dirpath, exist_ok=True)
        with open(os.path.join(self.dirpath, "reward_curves.json"), "w") as f:
            json.dump(self.history, f, indent=1)
        rows = self.windows()
        with open(os.path.join(self.dirpath, "reward_windows.json"), "w") as f:
            json.dump({"first_window": self.first_window, "last_window": self.last_window, "rows": rows}, f, indent=1)
        with open(os.path.join(self.dirpath, "reward_windows.md"), "w") as f:
            f.write(window_markdown(rows))
        for name, points in self.history.items():
            fig, ax = plt.subplots(figsize=(5, 3))
            ax.plot([p[0] for p in points], [p[1] for p in points], marker="o")
            ax.set_xlabel("training batch")
            ax.set_ylabel(f"mean {name}")
            ax.set_title(f"reward component: {name}")
            fig.tight_layout()
            fig.savefig(os.path.join(self.dirpath, f"reward_{name.replace('/', '_')}.png"), dpi=80)
            plt.close(fig)
        fig, ax = plt.subplots(figsize=(7, 4))
        for name, points in self.history.items():
            if name != "total":
                ax.plot([p[0] for p in points], [p[1] for p in points], label=name)
        ax.set_xlabel("training batch")
        ax.set_ylabel("mean reward")
        ax.set_title("reward components")
        ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(self.dirpath, "reward_components.png"), dpi=80)
        plt.close(fig)
