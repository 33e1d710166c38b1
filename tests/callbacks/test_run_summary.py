"""RunSummary: the logged metrics a run is judged by, kept per optimizer step and written to the run folder at the end
(summary.json, summary.md with the first-vs-last window table and the target-vs-control line, summary.png)."""

from __future__ import annotations

import json
from functools import partial

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import Callback, ModelCheckpoint

from propel.callbacks.run_summary import RunSummary
from propel.datamodules.agent_episodes import EpisodeDataModule
from propel.envs import ToolEnv
from propel.errors import ConfigError
from propel.lit_modules.distill import TurnKLDistillModule
from propel.losses.distillation import DivergenceSpec
from propel.models.lora import LoRASpec
from propel.rollouts.hints import ErrorHints
from propel.tasks.shell import ShellTasks
from tests.lit_modules.turn_kl_args import with_turn_kl

DISTILL = [
    "train/loss",
    "train/distill/divergence",
    "train/distill/control_divergence",
    "train/drift/off_target",
    "train/drift/gain",
    "train/never/logged",
]


class Logged(Callback):
    """What the module logged at each optimizer step (read right after the step, before anything else)."""

    def __init__(self, names):
        self.names, self.rows = names, []

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        seen = trainer.callback_metrics
        self.rows.append({k: float(seen[k]) for k in self.names if k in seen})


def _distill(model_dir, steps, callbacks, ckpt_path=None):
    pl.seed_everything(0)
    module = TurnKLDistillModule(
        **with_turn_kl(
            dict(
                model=str(model_dir),
                lora=LoRASpec(r=4, alpha=8),
                hints=ErrorHints(),  # a random model never writes a valid call: turn 0 is always targeted
                divergence=DivergenceSpec("jsd", beta=0.5, top_k=64),
                kl_coefficient=1.0,
                group_size=2,
                max_new_tokens=6,
                lr=1e-2,
                drift_episodes=1,
            )
        )
    )
    data = EpisodeDataModule(partial(ToolEnv, max_turns=2, command_timeout_s=2.0), ShellTasks(), contexts_per_step=1,
                             execute_cut_turns=True)  # fmt: skip
    trainer = pl.Trainer(max_steps=steps, accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=callbacks, enable_checkpointing=True,
                         default_root_dir=str(callbacks[0].dirpath))  # fmt: skip
    trainer.fit(module, datamodule=data, ckpt_path=ckpt_path)
    return trainer


def test_a_distillation_run_writes_what_it_logged_and_a_resume_keeps_the_history(tiny_model_dir, tmp_path):
    summary = RunSummary(str(tmp_path / "run"), DISTILL, first_window=1, last_window=1,
                         target="train/distill/divergence", control="train/distill/control_divergence")  # fmt: skip
    logged = Logged(DISTILL)
    save = ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=1, save_top_k=-1)
    _distill(tiny_model_dir, 2, [summary, logged, save])

    assert len(logged.rows) == 2 and "train/never/logged" not in summary.history
    for name in DISTILL[:-1]:  # every value the module logged, at its optimizer step (0-based)
        assert summary.history[name] == [(0, logged.rows[0][name]), (1, logged.rows[1][name])], name
    run = tmp_path / "run"
    data = json.loads((run / "summary.json").read_text())
    assert data["module"] == "propel.lit_modules.distill.TurnKLDistillModule" and data["global_step"] == 2
    assert data["history"]["train/loss"] == [[0, logged.rows[0]["train/loss"]], [1, logged.rows[1]["train/loss"]]]
    rows = {r["component"]: r for r in data["rows"]}
    div = rows["train/distill/divergence"]
    assert div["first_mean"] == logged.rows[0]["train/distill/divergence"]
    assert div["last_mean"] == logged.rows[1]["train/distill/divergence"]
    assert div["delta"] == pytest.approx(div["last_mean"] - div["first_mean"])
    comparison = data["comparison"]
    fell = {n: logged.rows[0][n] - logged.rows[1][n] for n in ("train/distill/divergence",
                                                               "train/distill/control_divergence")}  # fmt: skip
    assert comparison["target_fell_by"] == pytest.approx(fell["train/distill/divergence"])
    target, control = fell["train/distill/divergence"], fell["train/distill/control_divergence"]
    assert comparison["target_fell_more"] == (target > max(control, 0.0))
    md = (run / "summary.md").read_text()
    assert "`propel.lit_modules.distill.TurnKLDistillModule`" in md and "optimizer steps: 2 of max_steps 2" in md
    assert "| metric | steps 1-1 | steps 2-2 | delta |" in md
    assert f"| train/distill/divergence | {div['first_mean']:.3f} | {div['last_mean']:.3f} |" in md
    assert "Never logged: `train/never/logged`" in md
    verdict = "fell more than" if comparison["target_fell_more"] else "did not fall more than"
    assert f"the targeted divergence {verdict} the control's" in md
    assert (run / "summary.png").stat().st_size > 1000

    # resumed from the step-1 checkpoint: step 0 comes from the checkpoint, step 1 is run again
    resumed = RunSummary(str(tmp_path / "resumed"), DISTILL)
    _distill(tiny_model_dir, 2, [resumed], ckpt_path=str(tmp_path / "ckpt" / "epoch=0-step=1.ckpt"))
    for name in DISTILL[:-1]:
        assert [s for s, _ in resumed.history[name]] == [0, 1], name
        assert resumed.history[name][0] == summary.history[name][0], name  # the checkpoint's, bit for bit
        assert resumed.history[name][1][1] == pytest.approx(summary.history[name][1][1], rel=1e-4), name
    assert json.loads((tmp_path / "resumed" / "summary.json").read_text())["history"]["train/loss"][0] == [
        0,
        logged.rows[0]["train/loss"],
    ]


class Sometimes(pl.LightningModule):
    """A one-weight module that logs ``train/every`` at every batch and ``train/odd`` only at odd batches, and takes
    no optimizer step at batch 2."""

    def __init__(self):
        super().__init__()
        self.automatic_optimization = False
        self.w = torch.nn.Parameter(torch.zeros(1))

    def training_step(self, batch, batch_idx):
        self.log("train/every", float(10 + batch_idx), on_step=True)
        if batch_idx % 2:
            self.log("train/odd", float(batch_idx), on_step=True)
        if batch_idx == 3:
            self.log("train/nan", torch.ones(1) * float("nan"), on_step=True)
        if batch_idx == 2:
            return
        opt = self.optimizers()
        opt.zero_grad()
        self.manual_backward((self.w - 1).pow(2).sum())
        opt.step()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.zeros(6, 1), batch_size=1)


def test_a_metric_not_logged_at_a_step_is_skipped_and_so_is_a_batch_without_a_step(tmp_path):
    summary = RunSummary(str(tmp_path), ["train/every", "train/odd", "train/nan"], first_window=2, last_window=2,
                         target="train/odd", control="train/every")  # fmt: skip
    trainer = pl.Trainer(max_steps=5, accelerator="cpu", logger=False, enable_progress_bar=False,
                         enable_model_summary=False, enable_checkpointing=False, callbacks=[summary])  # fmt: skip
    trainer.fit(Sometimes())
    # batch 2 took no step (global step 2 is batch 3's); train/odd kept batch 1's value at batch 2 and was skipped
    assert summary.history["train/every"] == [(0, 10.0), (1, 11.0), (2, 13.0), (3, 14.0), (4, 15.0)]
    assert summary.history["train/odd"] == [(1, 1.0), (2, 3.0), (4, 5.0)]
    assert "train/nan" not in summary.history and summary.non_finite == {"train/nan": 1}
    data = json.loads((tmp_path / "summary.json").read_text())
    comparison = data["comparison"]  # train/odd rose by 2 ((1+3)/2 -> (3+5)/2), less than train/every's 4: no fall
    assert comparison["target_fell_by"] == pytest.approx(-2.0) and comparison["control_fell_by"] == pytest.approx(-4.0)
    assert not comparison["target_fell_more"]
    md = (tmp_path / "summary.md").read_text()
    assert "did not fall more than the control's" in md and "`train/nan` 1" in md
    assert "`train/odd` rose by 2 and `train/every` rose by 4 (first window to last)" in md  # no "fell by -2"
    line = summary.comparison_line({"target_fell_by": 0.5, "control_fell_by": 0.0, "target_fell_more": True})
    assert line.startswith("`train/odd` fell by 0.5 and `train/every` did not move (first window to last)")
    assert "different steps" in md  # train/odd's windows are not train/every's


def test_bad_arguments_raise_config_errors(tmp_path):
    ok = str(tmp_path)
    for kwargs, match in [
        ({"metrics": []}, "at least one"),
        ({"metrics": "train/loss"}, "list"),
        ({"metrics": ["train/loss", "train/loss"]}, "unique"),
        ({"metrics": ["train/loss"], "first_window": 0}, ">= 1"),
        ({"metrics": ["train/loss"], "last_window": -1}, ">= 1"),
        ({"metrics": ["train/loss"], "target": "train/loss"}, "together"),
        ({"metrics": ["train/loss"], "target": "train/loss", "control": "train/x"}, "one of metrics"),
        ({"metrics": ["train/loss"], "target": "train/loss", "control": "train/loss"}, "differ"),
    ]:
        with pytest.raises(ConfigError, match=match):
            RunSummary(ok, **kwargs)


def test_windows_are_cut_to_fit_a_short_run(tmp_path):
    summary = RunSummary(str(tmp_path), ["a", "b"], first_window=3, last_window=3)
    summary.load_state_dict({"history": {"a": [[0, 1.0], [1, 2.0], [2, 4.0]], "b": [[1, 5.0]]}})
    assert summary.effective_windows() == (1, 1)  # 3 steps: step 1 against step 3, not two overlapping windows
    rows = {r["component"]: r for r in summary.windows()}
    assert rows["a"]["first_steps"] == [0, 0] and rows["a"]["last_steps"] == [2, 2] and rows["a"]["delta"] == 3.0
    summary.load_state_dict({"history": {"a": [[s, float(s)] for s in range(6)]}})
    assert summary.effective_windows() == (3, 3)
