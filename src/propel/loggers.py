"""W&B logging that works out of the box: online with an API key, an offline run folder (synced later) without one."""

from __future__ import annotations

import netrc
import os

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
        os.makedirs(save_dir, exist_ok=True)
        super().__init__(*args, offline=offline, project=project, save_dir=save_dir, **kwargs)
        if self._wandb_init.get("anonymous") is None:  # Lightning always passes it; wandb warns it has no effect
            self._wandb_init.pop("anonymous", None)
        self._propel_offline = offline
        self.sync_command: str | None = None
        """Set at the end of an offline run: the command that uploads it."""

    def finalize(self, status: str) -> None:
        """Close the run (Lightning leaves it open, and a later run in this process would log into it)."""
        super().finalize(status)
        if self._experiment is None:
            return
        run_dir = os.path.dirname(self._experiment.dir.rstrip("/"))
        self._experiment.finish(exit_code=0 if status == "success" else 1)
        self._experiment = None
        if self._propel_offline:
            self.sync_command = f"wandb sync {run_dir}"
            rank_zero_info(f"W&B ran offline; to upload this run: {self.sync_command}")
