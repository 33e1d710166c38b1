"""Parts the data-parallel tests name by class path in ``propel`` subprocesses (this folder is on their PYTHONPATH).

One process and two ranks can only give the same result if every prompt gets the same completions wherever it is
sampled: ``PromptSeededHFEngine`` seeds the RNG from the prompt before sampling it, so a prompt's samples do not
depend on which rank, batch or neighbours it has. It is the HF engine on the live policy otherwise (no importance
correction, the same code path as ``engine: hf``).

The turn-KL runs use scripted agent episodes with no sandbox: ``PlannedTasks`` gives each context of batch ``i``
flags from a plan (``h``: its episodes get a hint on turn 0, ``f``: its reward is flat, ``b``: its environment fails
at reset, an infrastructure error with no prompt ids, ``1``: the episode ends after one turn), so a test decides which
rank has targets, kept rows or drift rows at each step.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback

from propel.engines.hf import HFEngine
from propel.envs.agent_env import AgentEnv, EpisodeState, Observation
from propel.lit_modules.distill import TurnKLDistillModule
from propel.lit_modules.grpo import GRPOModule
from propel.lit_modules.grpo_turn_kl import GRPOTurnKLModule
from propel.records import Context, Prompt, TaskSource
from propel.rewards.reward import Reward
from propel.rollouts.hints import Hint, HintSource


class PromptSeededHFEngine(HFEngine):
    """``HFEngine`` sampling one prompt per call, after ``torch.manual_seed(crc32(prompt, k))``, ``k`` counting the
    same prompt earlier in the call (the episodes of one group share their first prompt, and all of a group's
    episodes are in the same call on whichever rank holds the group)."""

    def generate(self, prompts, sampling):
        out, seen = [], {}
        for prompt in prompts:
            key = repr((prompt.text, prompt.messages, prompt.token_ids))
            k = seen[key] = seen.get(key, -1) + 1
            torch.manual_seed(zlib.crc32((key + ("" if k == 0 else f"#{k}")).encode()))
            out.extend(super().generate([prompt], sampling))
        return out


class PromptSeeded:
    """Mixin for a ``LoRAPolicyModule``: its rollout engine is ``PromptSeededHFEngine`` on the live policy."""

    def configure_model(self) -> None:
        fresh = self.policy is None
        super().configure_model()
        if fresh:
            self.engine = PromptSeededHFEngine(self.policy, self.tokenizer)


class PromptSeededGRPO(PromptSeeded, GRPOModule):
    """``GRPOModule`` whose rollout engine is ``PromptSeededHFEngine`` on the live policy."""


class PromptSeededGRPOTurnKL(PromptSeeded, GRPOTurnKLModule):
    """``GRPOTurnKLModule`` whose rollout engine is ``PromptSeededHFEngine`` on the live policy."""


class PromptSeededTurnKLDistill(PromptSeeded, TurnKLDistillModule):
    """``TurnKLDistillModule`` whose rollout engine is ``PromptSeededHFEngine`` on the live policy."""


class AdvantageRecord(PromptSeededGRPO):
    """``PromptSeededGRPO`` that appends each optimization's advantages to ``<advantages_dir>/rank<r>.jsonl``."""

    def __init__(self, advantages_dir: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.advantages_dir = Path(advantages_dir)

    def _update(self):
        self.advantages_dir.mkdir(parents=True, exist_ok=True)
        with open(self.advantages_dir / f"rank{self.global_rank}.jsonl", "a") as f:
            f.write(json.dumps(self.policy_gradient.batch.advantages.tolist()) + "\n")
        return super()._update()


class ListedRewards(Reward):
    """Reward: ``values[k]`` for the k-th completion of the step's global batch, k counted from the context's index
    in its batch (``context.data["index"]``) and the completion's place in its group."""

    name = "listed"

    def __init__(self, values: list[float], group_size: int) -> None:
        self.values, self.g = values, group_size

    def __call__(self, samples):
        seen: dict[str, int] = {}
        out = []
        for s in samples:
            k = seen[s.context.id] = seen.get(s.context.id, -1) + 1
            out.append(self.values[int(s.context.data["index"]) * self.g + k])
        return torch.tensor(out)


class Patchy(Reward):
    """Reward: a measure of the completion (``vowels``: its vowel share, ``length``: its characters / 20), NaN for
    every completion of a context whose id hashes to 0 mod 3 (a group no reward judges: skipped), and with
    ``partial`` for the first completion of one whose id hashes to 1 mod 3 (missing a verdict its group-mates got)."""

    def __init__(self, name: str, measure: str = "vowels", weight: float = 1.0, partial: bool = False) -> None:
        self.name, self.measure, self.weight, self.partial = name, measure, weight, partial

    def __call__(self, samples):
        seen: dict[str, int] = {}
        out = []
        for s in samples:
            k = seen[s.context.id] = seen.get(s.context.id, -1) + 1
            h = zlib.crc32(s.context.id.encode()) % 3
            value = _vowels(s.completion) if self.measure == "vowels" else len(s.completion) / 20
            out.append(float("nan") if h == 0 or (self.partial and h == 1 and k == 0) else value)
        return torch.tensor(out)


# ------------------------------------------------------------------------------------- planned agent episodes
class PlannedTasks(TaskSource):
    """Contexts whose ``data["flags"]`` come from ``plan[seed][i]`` (batch ``seed`` of a stream seeded 0)."""

    def __init__(self, plan: list[list[str]]) -> None:
        self.plan = plan

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        flags = self.plan[seed % len(self.plan)]
        prompts = [Prompt(messages=[{"role": "user", "content": f"Say a word about t{seed}-{i}."}]) for i in range(n)]
        return [Context(f"t{seed}-{i}", prompts[i], data={"flags": flags[i], "index": i}) for i in range(n)]


class PlannedEnv(AgentEnv):
    """Two turns (one with flag ``1``): the first answered by a tool error, the second ends the episode. Flag ``b``
    fails at reset (an infrastructure error before any token)."""

    def __init__(self) -> None:
        self._state = EpisodeState()

    @property
    def state(self) -> EpisodeState:
        return self._state

    def reset(self, context, sandbox=None) -> Observation:
        if "b" in context.data["flags"]:
            raise OSError("the sandbox went away")
        self.flags, self._state = context.data["flags"], EpisodeState(episode_id=context.id)
        return Observation(role="user", messages=list(context.prompt.messages))

    def step(self, action: str) -> Observation:
        self._state.step_count += 1
        if self._state.step_count >= (1 if "1" in self.flags else 2):
            return self.end("submitted")
        return Observation("error: not a tool call", metadata={"error": "not a tool call"})

    def end(self, finish_reason: str) -> Observation:
        self._state.done, self._state.finish_reason, self._state.verifier = True, finish_reason, {"passed": False}
        return Observation(done=True, reward=0.0, finish_reason=finish_reason)


class PlannedHints(HintSource):
    """A hint on turn 0 of every episode of a context flagged ``h``."""

    def hints(self, sample) -> list[Hint]:
        return [Hint(0, "answer with one tool call")] if "h" in sample.context.data["flags"] else []


class PlannedVowels(Reward):
    """The vowel share of the completion; 0 for every episode of a context flagged ``f`` (a zero-variance group)."""

    name = "planned"

    def __call__(self, samples):
        return torch.tensor([0.0 if "f" in s.context.data["flags"] else _vowels(s.completion) for s in samples])


def _vowels(text: str) -> float:
    return sum(ch in "aeiou" for ch in text.lower()) / max(1, len(text))


class VowelShare(Reward):
    """Reward: the share of a completion's characters that are vowels (varies within a group of random text)."""

    name = "vowels"

    def __call__(self, samples):
        return torch.tensor([_vowels(s.completion) for s in samples])


class StepRecord(Callback):
    """After each training step: rank 0 appends the logged (rank-reduced) metrics to ``<dirpath>/metrics.jsonl``;
    every rank appends the ids of the contexts it rolled out to ``<dirpath>/contexts-rank<r>.jsonl``. When training
    ends, every rank saves its adapter (and EMA teacher) weights to ``<dirpath>/lora-rank<r>.pt``."""

    KEYS = ("train/loss", "train/reward/mean", "train/reward/std", "train/kl", "train/entropy", "train/valid_rate")

    def __init__(self, dirpath: str, keys: list[str] | None = None):
        self.dirpath = Path(dirpath)
        self.keys = tuple(keys) if keys is not None else self.KEYS

    def on_train_end(self, trainer, pl_module) -> None:
        weights = {k: v.detach().cpu() for k, v in pl_module.policy.named_parameters() if "lora_" in k}
        ema = getattr(pl_module, "_ema", None)
        ema = {k: v.detach().cpu() for k, v in ema.items()} if ema is not None else None
        self.dirpath.mkdir(parents=True, exist_ok=True)
        torch.save({"lora": weights, "ema": ema}, self.dirpath / f"lora-rank{trainer.global_rank}.pt")

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
            self._append("metrics.jsonl", {"step": step, **{k: float(m[k]) for k in self.keys if k in m}})


def _groups(pl_module) -> list[list]:
    samples, g = pl_module.rollout_state.samples, pl_module.sampling.n
    return [samples[i : i + g] for i in range(0, len(samples), g)]
