"""The default W&B logger goes offline without credentials and its run folder can be read back."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pytest
import torch

from propel.loggers import PropelWandbLogger, wandb_credentials_present
from propel.testing.wandb_offline import wait_for_history


class _Regression(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(2, 1)

    def training_step(self, batch, _):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train/loss", loss, on_step=True)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def test_offline_without_credentials_and_history_reads_back(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    assert not wandb_credentials_present()
    import wandb

    wandb.finish()  # an earlier test's run would otherwise be reused by the logger
    logger = PropelWandbLogger(save_dir=str(tmp_path / "runs"), name="t")
    assert "anonymous" not in logger._wandb_init  # wandb warns about the setting whenever it is passed
    x = torch.randn(32, 2)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    trainer = L.Trainer(
        max_steps=6,
        logger=logger,
        log_every_n_steps=1,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(_Regression(), data)
    wandb.finish()
    losses = [row["train/loss"] for row in wait_for_history(tmp_path / "runs", "train/loss", 6) if "train/loss" in row]
    assert len(losses) == 6 and losses[-1] < losses[0]
    assert logger.sync_command.startswith("wandb sync ")
    assert (Path(logger.sync_command.split(" ", 2)[2]) / "files").is_dir()


def test_credentials_from_env(monkeypatch):
    monkeypatch.setenv("WANDB_API_KEY", "x" * 40)
    assert wandb_credentials_present()


class _RefusesItsOptimizer(_Regression):
    def configure_optimizers(self):  # after the W&B run has started (Lightning starts it in setup)
        raise ValueError("refused")


class _FailsAtStep(_Regression):
    def training_step(self, batch, batch_idx):
        if batch_idx == 3:
            raise ValueError("failed mid-run")
        return super().training_step(batch, batch_idx)


def _fails(module: L.LightningModule, logger: PropelWandbLogger) -> None:
    x = torch.randn(32, 2)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    trainer = L.Trainer(max_steps=6, logger=logger, log_every_n_steps=1, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)  # fmt: skip
    with pytest.raises(ValueError):
        trainer.fit(module, data)


def test_a_failed_start_leaves_no_offline_run_folder_and_a_failed_run_keeps_its_own(tmp_path):
    """A run that fails before it logs anything (a start that failed) leaves nothing behind, not even the save folder
    it made; one that logged before it failed keeps its folder, to sync or to read."""
    import wandb

    wandb.finish()
    save = tmp_path / "runs"
    logger = PropelWandbLogger(save_dir=str(save), offline=True)
    assert not save.exists()  # building the logger from a config makes nothing
    _fails(_RefusesItsOptimizer(), logger)
    assert logger.sync_command is None and not save.exists(), list(save.rglob("*"))

    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "earlier.txt").write_text("a user's file")
    logger = PropelWandbLogger(save_dir=str(tmp_path / "kept"), offline=True)
    _fails(_RefusesItsOptimizer(), logger)
    assert [p.name for p in (tmp_path / "kept").iterdir()] == ["earlier.txt"]  # a folder it did not make stays

    logger = PropelWandbLogger(save_dir=str(save), offline=True)
    _fails(_FailsAtStep(), logger)
    runs = list((save / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and (runs[0] / "files").is_dir() and logger.logged
