"""A verifiers environment's rubric as propel rewards: each of its weighted reward functions is a component.

The episodes come from ``propel.envs.VerifiersAgentEnv`` (single- or multi-turn), whose finished verifiers state is
what the rubric reads, with the same arguments verifiers passes (``prompt``, ``completion``, ``answer``, ``info``,
``task``, ``state``, the rubric's parser and class objects, the row's other columns; a function taking the plural
names gets a whole GRPO group's). In a run's ``rewards`` the rubric expands into one component per function
(``CombinedReward`` asks ``parts()``), named ``<name>.<function>`` with the function's weight, so each is summed,
logged (``train/reward/<name>.<function>/mean``, its unscored share and advantage share) and judged on its own. Async
functions run on the environments' event loop (``propel.tasks.verifiers_env.run``).

The prompt and completion reach the functions as ``ChatMessage``s, dicts with attribute access: environments
published for the classic API test ``isinstance(message, dict)`` (staros-stardata's rubric scored the text of a
message object's repr before), later ones read ``message.content``; the ``state`` is verifiers' own.

Where verifiers scores a function that raises 0, propel does not make up a judgement: a function that raises, returns
None, a non-number or a non-finite number did not judge that sample (NaN; ``propel.rewards.combine`` keeps such a
sample out of its group's advantages when its group-mates were judged). A function that returns a dict of numbers
(a metrics breakdown) judges nothing either; its entries are logged as ``<component>_<key>``. An episode lost to the
infrastructure is NaN for every function.
"""

from __future__ import annotations

import inspect
import logging
import math
from collections.abc import Mapping, Sequence
from numbers import Real
from typing import Any

import torch

from propel.envs.verifiers_env import final_state
from propel.errors import ConfigError
from propel.records import Sample
from propel.rewards.reward import Reward
from propel.tasks.verifiers_env import load, run

log = logging.getLogger(__name__)


def rubric_functions(rubric: Any) -> list[tuple[Any, Any, float]]:
    """``(rubric, function, weight)`` for every reward function of ``rubric``, rubric groups flattened in order (the
    rubric a function belongs to holds the parser and objects it is called with)."""
    if hasattr(rubric, "rubrics"):
        return [part for inner in rubric.rubrics for part in rubric_functions(inner)]
    return [(rubric, f, float(w)) for f, w in zip(rubric.funcs, rubric.weights, strict=True)]


def _judgement(value: Any) -> tuple[float, dict[str, float]]:
    """A function's return value as (score, logged entries): NaN unless it is a real number."""
    if isinstance(value, Mapping):
        return math.nan, {str(k): float(v) for k, v in value.items() if isinstance(v, Real)}
    if value is None:
        return math.nan, {}
    if not isinstance(value, Real):
        raise TypeError(f"returned a {type(value).__name__}, not a number")
    return float(value), {}


class ChatMessage(dict):
    """A message both generations of verifiers' reward functions read: a dict (``m["content"]``, ``m.get``,
    ``isinstance(m, dict)``: the classic API's messages, which published environments test for) and an object
    (``m.content``: the pydantic messages of verifiers 0.1.9 and later)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(name) from e


def chat(messages: Any) -> Any:
    """verifiers messages as ``ChatMessage``s (a string prompt or completion stays a string)."""
    if messages is None or isinstance(messages, str):
        return messages
    return [ChatMessage(m.model_dump() if hasattr(m, "model_dump") else dict(m)) for m in messages]


async def _call(function: Any, objects: dict[str, Any]) -> Any:
    """``function`` with the arguments it names (all of them when it takes ``**kwargs``), awaited when async; the
    prompt and completion as ``ChatMessage``s."""
    objects = {k: chat(v) if k in ("prompt", "completion") else v for k, v in objects.items()}
    for plural in ("prompts", "completions"):
        if plural in objects:
            objects[plural] = [chat(v) for v in objects[plural]]
    params = inspect.signature(function).parameters.values()
    if not any(p.kind == p.VAR_KEYWORD for p in params):
        names = {p.name for p in params}
        objects = {k: v for k, v in objects.items() if k in names}
    out = function(**objects)
    return await out if inspect.isawaitable(out) else out


class VerifiersRubric(Reward):
    """The rubric of the verifiers environment ``env``: its reward functions as components (``parts()``), or, used
    whole, their weighted sum over the functions that judged each sample.

    Args:
        env: the environment's id or ``module:function``, as the task source names it (the contexts must name the
            same environment).
        env_args: the loader's keyword arguments, as the task source's.
        name: prefix of the components' names (``<name>.<function>``).
        weight: multiplies every function's own weight.
    """

    def __init__(self, env: str, env_args: dict[str, Any] | None = None, name: str = "rubric", weight: float = 1.0):
        self.env, self.env_args, self.name, self.weight = env, dict(env_args or {}), name, weight
        self.functions = rubric_functions(load(env, self.env_args).rubric)
        if not self.functions:
            raise ConfigError(f"verifiers environment {env!r} has a rubric without reward functions")
        self._names = self._function_names()
        self._seen: tuple[Any, list[int]] | None = None
        self._table = torch.empty(0)
        self._logged: list[dict[str, torch.Tensor]] = []
        self._raised: list[int] = []

    def _function_names(self) -> list[str]:
        names: list[str] = []
        for _, f, _ in self.functions:
            base = f"{self.name}.{getattr(f, '__name__', 'reward')}"
            name, k = base, 2
            while name in names:
                name, k = f"{base}_{k}", k + 1
            names.append(name)
        return names

    def parts(self) -> list[Reward]:
        """One component per reward function: ``<name>.<function>`` with ``weight`` times the function's weight."""
        return [
            _RubricFunction(self, i, n, self.weight * w)
            for i, (n, (_, _, w)) in enumerate(zip(self._names, self.functions, strict=True))
        ]

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        table = self.table(samples)
        weights = torch.tensor([w for _, _, w in self.functions])
        paying = weights != 0 if bool((weights != 0).any()) else torch.ones_like(weights, dtype=torch.bool)
        finite = torch.isfinite(table)
        total = torch.where(finite, table * weights, torch.zeros(())).sum(dim=1) * self.weight
        return total.masked_fill(~(finite & paying).any(dim=1), math.nan)

    # ------------------------------------------------------------------------------------------- scoring
    def table(self, samples: Sequence[Sample]) -> torch.Tensor:
        """``(samples, functions)`` scores, NaN where a function did not judge a sample; computed once per batch of
        samples, whichever component asks first."""
        key = [id(s) for s in samples]
        if self._seen is None or self._seen[0] is not samples or self._seen[1] != key:
            self._score(samples)
            self._seen = (samples, key)
        return self._table

    def _score(self, samples: Sequence[Sample]) -> None:
        states = [self._state(i, s) for i, s in enumerate(samples)]
        groups: list[list[int]] = []
        for i, s in enumerate(samples):  # a GRPO group's samples share one Context object, consecutively
            if groups and samples[groups[-1][0]].context is s.context:
                groups[-1].append(i)
            else:
                groups.append([i])
        results = run(self._score_all(states, groups))
        self._table = torch.full((len(samples), len(self.functions)), math.nan)
        self._logged, self._raised = [], []
        for j, (values, errors) in enumerate(results):
            logged: dict[str, list[float]] = {}
            for i, value in enumerate(values):
                if i in errors or states[i] is None:
                    continue
                try:
                    self._table[i, j], entries = _judgement(value)
                except (TypeError, ValueError) as e:
                    errors[i] = f"{type(e).__name__}: {e}"
                    continue
                for k, v in entries.items():
                    logged.setdefault(k, [math.nan] * len(samples))[i] = v
            self._logged.append({k: torch.tensor(v) for k, v in logged.items()})
            self._raised.append(len(errors))
            if errors:
                first = next(iter(errors.values()))
                log.warning(
                    "propel: verifiers reward function %r judged %d of %d samples not (raised or no number): %s",
                    self._names[j], len(errors), len(samples), first[:300],
                )  # fmt: skip

    def _state(self, index: int, sample: Sample) -> Any | None:
        """The episode's finished verifiers state (None for an episode lost to the infrastructure)."""
        data = sample.context.data if sample.context is not None else {}
        if data.get("env") not in (None, self.env):
            raise ConfigError(
                f"VerifiersRubric scores environment {self.env!r}; sample {index} comes from {data.get('env')!r}"
            )
        if sample.infra_error is not None:
            return None
        key = sample.artifacts.get("verifier", {}).get("verifiers_state")
        if key is None:
            raise ConfigError(
                f"VerifiersRubric scores episodes of propel.envs.VerifiersAgentEnv; sample {index} is not one (use "
                "propel.datamodules.agent_episodes.EpisodeDataModule with env: propel.envs.VerifiersAgentEnv)"
            )
        state = final_state(key)
        if state is None:
            log.warning("propel: episode %s's verifiers state is gone (another process?): not judged", key)
        return state

    async def _score_all(self, states: list[Any], groups: list[list[int]]) -> list[tuple[list[Any], dict[int, str]]]:
        import asyncio

        async def one(rubric: Any, f: Any, i: int) -> Any:
            return await _call(f, rubric.score_objects(states[i]))

        async def group(rubric: Any, f: Any, members: list[int]) -> list[Any]:
            out = list(await _call(f, rubric.group_score_objects([states[i] for i in members])))
            if len(out) != len(members):
                raise ValueError(f"returned {len(out)} values for a group of {len(members)}")
            return out

        results = []
        live = [i for i, st in enumerate(states) if st is not None]
        for rubric, f, _ in self.functions:
            values: list[Any] = [None] * len(states)
            errors: dict[int, str] = {}
            if rubric._is_group_func(f):
                members = [[i for i in g if states[i] is not None] for g in groups]
                members = [m for m in members if m]
                done = await asyncio.gather(*(group(rubric, f, m) for m in members), return_exceptions=True)
                for m, out in zip(members, done, strict=True):
                    for k, i in enumerate(m):
                        if isinstance(out, BaseException):
                            errors[i] = f"{type(out).__name__}: {out}"
                        else:
                            values[i] = out[k]
            else:
                done = await asyncio.gather(*(one(rubric, f, i) for i in live), return_exceptions=True)
                for i, out in zip(live, done, strict=True):
                    if isinstance(out, BaseException):
                        errors[i] = f"{type(out).__name__}: {out}"
                    else:
                        values[i] = out
            results.append((values, errors))
        return results


class _RubricFunction(Reward):
    """One reward function of a ``VerifiersRubric`` as a component (its column of the rubric's table)."""

    def __init__(self, rubric: VerifiersRubric, index: int, name: str, weight: float) -> None:
        self.rubric, self.index, self.name, self.weight = rubric, index, name, weight

    def __call__(self, samples: Sequence[Sample]) -> torch.Tensor:
        return self.rubric.table(samples)[:, self.index].clone()

    def step_stats(self) -> dict[str, float]:
        """Samples this function did not judge because it raised or returned something other than a number."""
        return {"raised": float(self.rubric._raised[self.index])} if self.rubric._raised else {}

    def logged_values(self) -> dict[str, torch.Tensor]:
        """The entries of the dicts the function returned (a metrics breakdown), per sample."""
        return dict(self.rubric._logged[self.index]) if self.rubric._logged else {}
