"""Tasks from a verifiers environment's dataset: each row (``prompt`` or ``question``, ``answer``, ``info``, ``task``)
becomes a propel context whose chat prompt is the row's prompt as the environment formatted it (its system prompt and
few-shot examples included) and whose ``data`` carries the row and the environment's name, so the episode
(``propel.envs.VerifiersAgentEnv``) and the rubric (``propel.rewards.VerifiersRubric``) find both."""

from __future__ import annotations

import random
from typing import Any

from propel.errors import ConfigError
from propel.records import Context, Prompt, TaskSource
from propel.tasks.verifiers_env import load

SPLITS = ("train", "eval")


def chat_messages(prompt: Any) -> list[dict[str, str]]:
    """A verifiers prompt as chat messages: a plain string is one user message; messages keep their role (a
    completion-style ``text`` message is the user's) and the text of their content parts."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    out = []
    for message in prompt or []:
        role, content = message.get("role"), message.get("content")
        if isinstance(content, list):
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        out.append({"role": "user" if role == "text" else str(role), "content": content or ""})
    return out


class VerifiersTasks(TaskSource):
    """``contexts(n, seed)``: ``n`` rows of a verifiers environment's dataset, drawn with replacement (a GRPO group
    shares one row).

    Args:
        env: the environment's id (the installed module exposing ``load_environment``, e.g.
            ``stardata.envs.constraint_gym``) or ``module:function``.
        env_args: the loader's keyword arguments.
        split: ``train`` (the environment's dataset) or ``eval`` (its eval dataset; verifiers falls back to the
            train dataset when there is none).
    """

    def __init__(self, env: str, env_args: dict[str, Any] | None = None, split: str = "train") -> None:
        if split not in SPLITS:
            raise ConfigError(f"VerifiersTasks split must be one of {SPLITS}, got {split!r}")
        self.env, self.env_args, self.split = env, dict(env_args or {}), split

    def rows(self) -> Any:
        """The split's dataset, formatted by the environment (a ``prompt`` column of messages, ``example_id``)."""
        vf_env = load(self.env, self.env_args)
        dataset = vf_env.get_dataset() if self.split == "train" else vf_env.get_eval_dataset()
        if dataset is None or len(dataset) == 0:
            raise ConfigError(f"verifiers environment {self.env!r} has no {self.split} dataset")
        return dataset

    def contexts(self, n: int, seed: int = 0) -> list[Context]:
        dataset = self.rows()
        rng = random.Random(seed)
        out = []
        for index in (rng.randrange(len(dataset)) for _ in range(n)):
            row = dict(dataset[index])
            example = row.get("example_id", index)
            out.append(
                Context(
                    id=f"vf-{self.split}-{example}",
                    prompt=Prompt(messages=chat_messages(row.get("prompt"))),
                    group=str(example),
                    data={"env": self.env, "env_args": dict(self.env_args), "row": row},
                )
            )
        return out
