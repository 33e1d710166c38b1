"""Silence what a user cannot act on (dependencies' deprecation warnings, Lightning's "Tip" adverts and hardware
banners, per-load progress bars), for the ``propel`` command and for anything that builds ``PropelCLI`` directly
(the pipeline, benchmarks, notebooks). Imports nothing heavy."""

from __future__ import annotations

import logging
import os
import warnings

NOT_ACTIONABLE = (
    r".*LightningCLI's args parameter is intended",
    # propel's manual optimization checkpoints after the step it counts: the state matches global_step
    r".*Using ModelCheckpoint with manual optimization and every_n_train_steps",
    # the task-pool and rollout loaders are iterables of ready batches, one process per rank, no workers
    r".*Your `IterableDataset` has `__len__` defined",
    r".*Couldn't infer the batch indices fetched from your dataloader",
    # `propel fit` resumes from the run folder by default, and says so (or that it starts over there) itself
    r".*Checkpoint directory .* exists and is not empty",
)
"""Lightning warnings that describe propel's own, deliberate loader and checkpoint set-up: nothing a user can change."""


class _NoAdverts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        return not ("Tip:" in text or "available:" in text and ("GPU" in text or "TPU" in text or "HPU" in text))


def quiet_dependencies() -> None:
    """Silence what a user cannot act on: dependencies' deprecation warnings, Lightning's "Tip" adverts and
    hardware banners, per-load progress bars of transformers and the hub. propel's own warnings, progress bars and
    the ``wandb sync`` hint stay. Calling it again changes nothing."""
    for category in (DeprecationWarning, PendingDeprecationWarning, FutureWarning):
        warnings.filterwarnings("ignore", category=category)
        warnings.filterwarnings("default", category=category, module=r"propel(\.|$)")
    for message in NOT_ACTIONABLE:
        warnings.filterwarnings("ignore", message=message)
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("WANDB_SILENT", "true")

    for name in ("lightning.pytorch", "lightning.fabric", "lightning.pytorch.utilities.rank_zero"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, _NoAdverts) for f in logger.filters):
            logger.addFilter(_NoAdverts())
