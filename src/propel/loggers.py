"""W&B logging that works out of the box: online with an API key, an offline run folder (synced later) without one.

A run that fails or is stopped before it logged anything leaves no offline run folder behind: the folders of failed
starts (a bad value, a model that is not there) piled up beside the real runs, each looking like a run to sync. The
save folder itself is made when the run starts, not when the logger is built from the config.
"""

from __future__ import annotations

import netrc
import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from lightning.pytorch.loggers import WandbLogger
from lightning.pytorch.utilities import rank_zero_info


def wandb_credentials_present() -> bool:
    """True when an API key is in the environment or in ~/.netrc (what ``wandb login`` writes)."""
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        auth = netrc.netrc().authenticators("api.wandb.ai")
    except (FileNotFoundError, netrc.NetrcParseError, OSError):
        return False
    return bool(auth and auth[2])


class PropelWandbLogger(WandbLogger):
    """``WandbLogger`` that goes offline by itself when no credentials exist and says how to sync afterwards.

    Other arguments are those of ``lightning.pytorch.loggers.WandbLogger``.

    Args:
        offline: force offline (True) or online (False); None decides from ``WANDB_MODE`` and credentials.
    """

    def __init__(self, *args, offline: bool | None = None, project: str = "propel", save_dir: str = "runs", **kwargs):
        if offline is None:
            mode = os.environ.get("WANDB_MODE", "")
            no_key = mode != "online" and not wandb_credentials_present()
            offline = mode in ("offline", "dryrun", "disabled") or no_key
        super().__init__(*args, offline=offline, project=project, save_dir=save_dir, **kwargs)
        if self._wandb_init.get("anonymous") is None:  # Lightning always passes it; wandb warns it has no effect
            self._wandb_init.pop("anonymous", None)
        self._propel_offline = offline
        self.sync_command: str | None = None
        """Set at the end of an offline run: the command that uploads it."""
        self.logged = False
        """Whether the run logged any metric (a run that fails before it did leaves no offline folder)."""
        self._made_save_dir = False

    @property
    def experiment(self):
        """The W&B run, started on first use; the save folder is made here, when a run starts."""
        if self._experiment is None and not os.path.isdir(self._save_dir):
            os.makedirs(self._save_dir, exist_ok=True)
            self._made_save_dir = True
        return super().experiment

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        self.logged = True
        super().log_metrics(metrics, step)

    def finalize(self, status: str) -> None:
        """Close the run (Lightning leaves it open, and a later run in this process would log into it); an offline
        run that failed before it logged anything is removed (``remove_run_folder``)."""
        super().finalize(status)
        if self._experiment is None:
            return
        run_dir = os.path.dirname(self._experiment.dir.rstrip("/"))
        self._experiment.finish(exit_code=0 if status == "success" else 1)
        self._experiment = None
        if not self._propel_offline:
            return
        if status != "success" and not self.logged:
            remove_run_folder(Path(run_dir), self._save_dir if self._made_save_dir else None)
            return
        self.sync_command = f"wandb sync {run_dir}"
        rank_zero_info(f"W&B ran offline; to upload this run: {self.sync_command}")


def remove_run_folder(run_dir: Path, made: str | None = None) -> None:
    """Remove an offline run folder, the links W&B keeps to it (``latest-run``, ``debug.log``) and the folders left
    empty: ``wandb/`` and ``made``, the save folder, when this run made it."""
    shutil.rmtree(run_dir, ignore_errors=True)
    parent = run_dir.parent
    for link in parent.iterdir() if parent.is_dir() else ():
        if link.is_symlink() and not link.exists():  # pointed into the removed folder
            link.unlink()
    for folder in (parent, Path(made) if made else None):
        if folder is not None and folder.is_dir() and not any(folder.iterdir()):
            folder.rmdir()
