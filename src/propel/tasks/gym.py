"""reasoning-gym's procedural datasets as a task source: several datasets by name and config, mixed by weight.

reasoning-gym (``pip install -e .[gym]``) generates each of its 100+ task families offline, item ``i`` of a dataset
a pure function of (config, seed, ``i``). ``ReasoningGymTasks.contexts(n, seed)`` draws each context's dataset by
weight and an item index with one ``random.Random(seed)``, so a batch is deterministic in the seed. A context carries
the item (question, oracle answer, metadata), its dataset's name and config and the answer's tag in ``data``: what
``propel.rewards.ReasoningGymReward`` scores with (the dataset's own ``score_answer``), here or, exported, in TRL.
"""

from __future__ import annotations

import functools
import json
import random
import re
from dataclasses import dataclass, field
from typing import Any

from propel.errors import ConfigError
from propel.records import Context, Prompt, TaskSource

TAGGED = "Put your final answer between <{tag}> and </{tag}>."
PLAIN = "Reply with only the final answer."


@dataclass
class GymDataset:
    """One reasoning-gym dataset of the mix."""

    name: str
    """The dataset's registered name (``chain_sum``, ``gcd``, ``spell_backward``, ...)."""
    weight: float = 1.0
    """Relative share of the contexts drawn from it (weights need not sum to 1)."""
    config: dict[str, Any] = field(default_factory=dict)
    """Its config fields other than ``seed``/``size`` (e.g. ``{max_terms: 2, max_digits: 1}`` for ``chain_sum``)."""


def _reasoning_gym():
    try:
        import reasoning_gym
    except ModuleNotFoundError as e:
        raise ConfigError("reasoning-gym tasks need the gym extra: pip install -e '.[gym]'") from e
    return reasoning_gym


@functools.lru_cache(maxsize=64)
def _dataset(name: str, config_json: str, seed: int, size: int):
    rg = _reasoning_gym()
    from reasoning_gym.factory import DATASETS

    if name not in DATASETS:
        raise ConfigError(f"unknown reasoning-gym dataset {name!r}; known: {', '.join(sorted(DATASETS))}")
    config = json.loads(config_json)
    reserved = sorted({"seed", "size"} & set(config))
    if reserved:
        raise ConfigError(f"reasoning-gym dataset {name!r}: set {reserved} on ReasoningGymTasks, not in its config")
    try:
        return rg.create_dataset(name, seed=seed, size=size, **config)
    except (TypeError, AssertionError, ValueError) as e:
        raise ConfigError(f"reasoning-gym dataset {name!r} rejects config {config}: {e}") from e


def gym_dataset(name: str, config: dict[str, Any] | None = None, seed: int = 0, size: int = 10_000):
    """The reasoning-gym dataset ``name`` built with ``config`` (cached: one instance per name, config, seed, size)."""
    return _dataset(name, json.dumps(config or {}, sort_keys=True), seed, size)


def answer_tag(data: dict[str, Any]) -> str | None:
    """The tag a context's answer goes in (``data["answer_tag"]``; ``answer`` when the context does not say)."""
    return data.get("answer_tag", "answer")


def extract_answer(completion: str, tag: str | None = "answer") -> str | None:
    """The stripped text of the last ``<tag>...</tag>`` (None without one); ``tag=None``: the whole stripped
    completion. Stripped because reasoning-gym's containment scoring pays ``len(oracle) / len(answer)``: a
    surrounding space would cost a correct answer."""
    if tag is None:
        return completion.strip()
    found = re.findall(f"<{re.escape(tag)}>(.*?)</{re.escape(tag)}>", completion, flags=re.DOTALL)
    return found[-1].strip() if found else None


class ReasoningGymTasks(TaskSource):
    """Contexts from a weighted mix of reasoning-gym datasets (``contexts(n, seed)``, deterministic in the seed).

    Args:
        datasets: the mix: each a name, a weight and the dataset's config.
        tag: the tag the answer goes in (``<answer>...</answer>``: reasoning-gym's convention); None: the whole
            completion is the answer. Contexts carry it (``data["answer_tag"]``) to the reward and the scorer.
        instruction: appended to every question; None asks for the answer in ``tag`` (or for only the answer when
            ``tag`` is None); empty for none.
        system_prompt: a system message before the question; None for none.
        shots: worked examples before each question (items ``0..shots-1`` of the question's dataset, each a user turn
            and the assistant's answer in the asked format; questions are drawn from the other items): a small model
            learns the answer format from them.
        seed: the datasets' own generator seed (dataset ``k`` of the list uses ``seed + k``); the stream's seed picks
            which items a batch gets.
        size: items per dataset the draws index into (reasoning-gym generates item ``i`` on demand).
    """

    def __init__(
        self,
        datasets: list[GymDataset],
        tag: str | None = "answer",
        instruction: str | None = None,
        system_prompt: str | None = None,
        shots: int = 0,
        seed: int = 0,
        size: int = 10_000,
    ) -> None:
        datasets = [GymDataset(**d) if isinstance(d, dict) else d for d in datasets]
        if not datasets:
            raise ConfigError("ReasoningGymTasks needs at least one dataset")
        names = [d.name for d in datasets]
        if len(set(names)) != len(names):
            raise ConfigError(
                f"ReasoningGymTasks: each dataset once (its reward is logged under its name), got {names}"
            )
        if any(d.weight <= 0 for d in datasets):
            raise ConfigError(f"ReasoningGymTasks: weights must be > 0, got {[d.weight for d in datasets]}")
        if shots < 0 or size <= shots:
            raise ConfigError(f"ReasoningGymTasks: need 0 <= shots < size, got shots={shots}, size={size}")
        if instruction is None:
            instruction = PLAIN if tag is None else TAGGED.format(tag=tag)
        self.datasets, self.tag, self.instruction, self.system_prompt = datasets, tag, instruction, system_prompt
        self.shots, self.seed, self.size = shots, seed, size
        self._built = [gym_dataset(d.name, d.config, seed + k, size) for k, d in enumerate(datasets)]

    def context(self, k: int, index: int) -> Context:
        """Item ``index`` of dataset ``k`` of the mix as a context."""
        spec, built = self.datasets[k], self._built[k]
        entry = built[index]
        messages = [] if self.system_prompt is None else [{"role": "system", "content": self.system_prompt}]
        for j in range(self.shots):
            example = built[j]
            answer = example["answer"] if self.tag is None else f"<{self.tag}>{example['answer']}</{self.tag}>"
            messages += [{"role": "user", "content": self._ask(example)}, {"role": "assistant", "content": answer}]
        messages.append({"role": "user", "content": self._ask(entry)})
        data = {
            "dataset": spec.name,
            "config": dict(spec.config),
            "question": entry["question"],
            "answer": entry["answer"],
            "metadata": entry.get("metadata", {}),
            "answer_tag": self.tag,
        }
        return Context(
            id=f"{spec.name}/{self.seed + k}/{index}", prompt=Prompt(messages=messages), group=spec.name, data=data
        )

    def _ask(self, entry: dict[str, Any]) -> str:
        return entry["question"] + (f"\n\n{self.instruction}" if self.instruction else "")

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        rng = random.Random(seed)
        weights = [d.weight for d in self.datasets]
        picks = rng.choices(range(len(self.datasets)), weights=weights, k=n)
        return [self.context(k, rng.randrange(self.shots, self.size)) for k in picks]
