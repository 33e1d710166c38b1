"""Parts the data-parallel tests name by class path in ``propel`` subprocesses (this folder is on their PYTHONPATH).

One process and two ranks can only give the same result if every prompt gets the same completions wherever it is
sampled: ``PromptSeededHFEngine`` seeds the RNG from the prompt before sampling it, so a prompt's samples do not
depend on which rank, batch or neighbours it has. It is the HF engine on the live policy otherwise (no importance
correction, the same code path as ``engine: hf``).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback

from propel.engines.hf import HFEngine
from propel.lit_modules.grpo import GRPOModule
from propel.rewards.base import Reward


class PromptSeededHFEngine(HFEngine):
    """``HFEngine`` sampling one prompt per call, after ``torch.manual_seed(crc32(prompt))``."""

    def generate(self, prompts, sampling):
        out = []
        for prompt in prompts:
            torch.manual_seed(zlib.crc32(repr((prompt.text, prompt.messages, prompt.token_ids)).encode()))
            out.extend(super().generate([prompt], sampling))
        return out


class PromptSeededGRPO(GRPOModule):
    """``GRPOModule`` whose rollout engine is ``PromptSeededHFEngine`` on the live policy."""

    def configure_model(self) -> None:
        fresh = self.policy is None
        super().configure_model()
        if fresh:
            self.engine = PromptSeededHFEngine(self.policy, self.tokenizer)


class VowelShare(Reward):
    """Reward: the share of a completion's characters that are vowels (varies within a group of random text)."""

    name = "vowels"

    def __call__(self, samples):
        return torch.tensor(
            [sum(ch in "aeiou" for ch in s.completion.lower()) / max(1, len(s.completion)) for s in samples]
        )


class StepRecord(Callback):
    """After each training step: rank 0 appends the logged (rank-reduced) metrics to ``<dirpath>/metrics.jsonl``;
    every rank appends the ids of the contexts it rolled out to ``<dirpath>/contexts-rank<r>.jsonl``."""

    KEYS = ("train/loss", "train/reward/mean", "train/reward/std", "train/kl", "train/entropy", "train/valid_rate")

    def __init__(self, dirpath: str):
        self.dirpath = Path(dirpath)

    def _append(self, name: str, row: dict) -> None:
        self.dirpath.mkdir(parents=True, exist_ok=True)
        with open(self.dirpath / name, "a") as f:
            f.write(json.dumps(row) + "\n")

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        groups = [[s.context.id for s in group] for group in _groups(pl_module)]
        self._append(
            f"contexts-rank{trainer.global_rank}.jsonl", {"step": step, "index": batch.index, "groups": groups}
        )
        if trainer.is_global_zero:
            m = trainer.callback_metrics
            self._append("metrics.jsonl", {"step": step, **{k: float(m[k]) for k in self.KEYS if k in m}})


def _groups(pl_module) -> list[list]:
    samples, g = pl_module.rollout_state.samples, pl_module.hparams.group_size
    return [samples[i : i + g] for i in range(0, len(samples), g)]
