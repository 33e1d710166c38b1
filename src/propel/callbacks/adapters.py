"""Save the policy's LoRA adapter in peft format every N steps: loadable by peft, vLLM and ``propel test``.

Lightning checkpoints hold the adapter too, but as a training state; a peft folder (``adapter_config.json`` +
``adapter_model.safetensors`` + the tokenizer) is what serving and evaluation tools read directly.
"""

from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.trainer.states import TrainerFn

from propel.callbacks.last_checkpoint import in_optimizer_step
from propel.cli import stops
from propel.cli.resume import shown
from propel.durable import publish_dir
from propel.errors import ConfigError
from propel.lit_modules.lora_policy import LoRAPolicyModule


def save_adapter(policy, tokenizer, directory: str | Path) -> Path:
    """Write ``policy``'s adapter (and ``tokenizer``) into ``directory`` atomically and durably (temp folder, fsync,
    rename, fsync of the parent)."""

    def save(folder: Path) -> None:
        policy.save_pretrained(str(folder))
        if tokenizer is not None:
            tokenizer.save_pretrained(str(folder))

    return publish_dir(save, directory)


class AdapterSaver(pl.Callback):
    """Every ``every_n_steps`` optimizer steps, at the end of fit and when a signal stops it (Ctrl-C, SIGTERM: the
    adapter of the last finished step, unless the stop came inside an optimizer update) save ``dirpath/step-<N>``.

    The interval continues across a resume (the last step seen is in the checkpoint, and ``global_step`` at the start
    of fit is taken as seen), so a resumed run saves on the next multiple, not at its first step.

    Reads a ``LoRAPolicyModule``'s ``policy`` (a peft model) and ``tokenizer``. Under DDP rank 0 alone writes (every
    rank holds the same all-reduced adapter); a sharded strategy (FSDP) would need every rank to gather it first.

    Args:
        dirpath: parent folder of the ``step-<N>`` adapter folders.
        every_n_steps: save interval in optimizer steps.
        save_last: also save when training ends (if that step was not saved already).
    """

    def __init__(self, dirpath: str = "runs/grpo/adapters", every_n_steps: int = 25, save_last: bool = True):
        if every_n_steps < 1:
            raise ConfigError(f"every_n_steps must be >= 1, got {every_n_steps}")
        self.dirpath, self.every_n_steps, self.save_last = Path(dirpath), every_n_steps, save_last
        self.saved: list[Path] = []
        self._last_step = self._start_step = 0

    def _save(self, trainer, pl_module) -> None:
        step = trainer.global_step
        target = self.dirpath / f"step-{step}"
        if not trainer.is_global_zero or (self.saved and self.saved[-1] == target):
            return
        if not isinstance(pl_module, LoRAPolicyModule):
            raise TypeError(f"AdapterSaver saves a LoRAPolicyModule's adapter, got {type(pl_module).__name__}")
        self.dirpath.mkdir(parents=True, exist_ok=True)
        self.saved.append(save_adapter(pl_module.policy, pl_module.tokenizer, target))

    def on_train_start(self, trainer, pl_module) -> None:
        self._last_step = trainer.global_step  # a resumed run continues the interval: no off-interval save first
        self._start_step = trainer.global_step

    def state_dict(self) -> dict:
        return {"last_step": self._last_step, "saved": [str(p) for p in self.saved]}

    def load_state_dict(self, state_dict: dict) -> None:
        self._last_step = int(state_dict.get("last_step", 0))
        self.saved = [Path(p) for p in state_dict.get("saved", [])]

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step  # with ppo_epochs > 1 it advances by more than 1: save on crossing a multiple
        if step // self.every_n_steps > self._last_step // self.every_n_steps:
            self._save(trainer, pl_module)
        self._last_step = step

    def on_train_end(self, trainer, pl_module) -> None:
        if self.save_last and trainer.global_step:
            self._save(trainer, pl_module)

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        stopped = stops.is_stop(exception) and trainer.state.fn == TrainerFn.FITTING
        if not stopped or not self.save_last or trainer.global_step <= self._start_step or in_optimizer_step(trainer):
            return
        self._save(trainer, pl_module)
        if trainer.is_global_zero:
            stops.note(f"wrote the adapter {shown(self.saved[-1])}", resumable=False)
