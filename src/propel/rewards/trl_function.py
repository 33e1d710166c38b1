"""A TRL reward function as a propel reward: ``reward_func(prompts, completions, **kwargs) -> list[float]``.

The function gets what TRL's ``GRPOTrainer`` would pass it for the same rows (``propel.rewards.trl_io``): each
context's prompt (chat messages, or text), the completions (one assistant message each for chat prompts, else the
text), ``completion_ids`` (the exact sampled ids), every field of the contexts' ``data`` as a column (a list, None
where a context lacks the field; nested fields too, which a TRL dataset built with ``trl_row`` carries only in JSON;
fields named ``prompt``/``completion``/``completion_ids`` are not passed, as TRL does not pass such columns), and
TRL's ``trainer_state`` (None here: propel's rewards do not see the trainer), ``log_extra(column, values)`` (kept in
``sample.info[<name>]``) and ``log_metric(name, value)`` (logged as ``train/reward/<name>/<metric>``). A None reward
(TRL: "not applicable to this sample") is NaN: the function did not judge the sample. As in TRL 1.16, the sum runs
over the functions that judged it and a completion none judged is unscorable (out of its group's advantages; TRL
zeroes its advantage, propel also keeps it out of the loss); unlike TRL, a completion missing a judgement its
group-mates got is not compared with them (``propel.losses.scorable``). Nones are counted in ``.../none``.

In YAML the function is named by its import path (``function: my_rewards.correctness`` or
``my_rewards:correctness``).
"""

from __future__ import annotations

import importlib
import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

import torch

from propel.errors import ConfigError
from propel.records import Sample
from propel.rewards.reward import Reward
from propel.rewards.trl_io import ROW_KEYS, trl_completion, trl_prompt


def import_function(path: str) -> Callable[..., Any]:
    """The object at ``module.attr`` or ``module:attr`` (nested attributes allowed after the colon)."""
    module, sep, attr = path.partition(":")
    if not sep:
        module, _, attr = path.rpartition(".")
    if not module or not attr:
        raise ConfigError(f"a reward function's import path looks like 'package.module.function', got {path!r}")
    try:
        found: Any = importlib.import_module(module)
        for part in attr.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as e:
        raise ConfigError(f"cannot import reward function {path!r}: {e}") from e
    if not callable(found):
        raise ConfigError(f"reward function {path!r} is not callable")
    return found


def _prompt(sample: Sample) -> str | list[dict[str, Any]]:
    return trl_prompt(sample.context.prompt) if sample.context is not None else sample.prompt


class TRLRewardFunction(Reward):
    """A TRL-style reward function as a reward component.

    Args:
        function: the function, or its import path (``package.module.function``).
        name: the component's name; None: the function's ``__name__`` (TRL's name for it too).
        weight: weight in a ``CombinedReward``.
        conversational: pass completions as chat messages; None: when the contexts' prompts are chat messages (what
            TRL does for a dataset of such prompts).
        kwargs: fixed keyword arguments added to every call.
    """

    def __init__(
        self,
        function: str | Callable[..., Sequence[float | None]],
        name: str | None = None,
        weight: float = 1.0,
        conversational: bool | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.function = import_function(function) if isinstance(function, str) else function
        if not callable(self.function):
            raise ConfigError(f"TRLRewardFunction needs a callable or an import path, got {function!r}")
        self.name = name or getattr(self.function, "__name__", "trl_reward")
        self.weight, self.conversational, self.kwargs = weight, conversational, dict(kwargs or {})
        self._metrics: dict[str, list[float]] = defaultdict(list)
        self._nones = 0

    def inputs(self, samples: Sequence[Sample]) -> dict[str, Any]:
        """The keyword arguments TRL would call the function with for these samples (less the trainer hooks)."""
        prompts = [_prompt(s) for s in samples]
        conversational = self.conversational
        if conversational is None:
            conversational = bool(prompts) and isinstance(prompts[0], list)
        fields: dict[str, None] = {}
        for s in samples:
            fields.update(dict.fromkeys(k for k in (s.context.data if s.context else {}) if k not in ROW_KEYS))
        columns = {k: [(s.context.data if s.context else {}).get(k) for s in samples] for k in fields}
        return {
            "prompts": prompts,
            "completions": [trl_completion(s.completion, conversational) for s in samples],
            "completion_ids": [s.response_ids for s in samples],
            **columns,
        }

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        self._metrics, self._nones = defaultdict(list), 0
        extra: dict[str, list] = {}

        def log_extra(column: str, values: list) -> None:
            extra[column] = list(values)

        def log_metric(name: str, value: float) -> None:
            self._metrics[name].append(float(value))

        hooks = {"trainer_state": None, "log_extra": log_extra, "log_metric": log_metric}
        out = list(self.function(**self.inputs(samples), **hooks, **self.kwargs))
        if len(out) != len(samples):
            raise ValueError(f"reward function {self.name!r} returned {len(out)} rewards for {len(samples)} samples")
        self._nones = sum(v is None for v in out)
        for column, values in extra.items():
            for s, value in zip(samples, values, strict=False):
                s.info.setdefault(self.name, {})[column] = value
        return torch.tensor([math.nan if v is None else float(v) for v in out], dtype=torch.float32)

    def step_stats(self) -> dict[str, float]:
        """What the function logged with ``log_metric`` (averaged per call) and how many rewards were None."""
        stats = {name: sum(v) / len(v) for name, v in self._metrics.items()}
        stats["none"] = float(self._nones)
        return stats
