"""A conversation whose user turns are scripted: every episode reaches every turn, whatever the assistant says.

The task is a ``Context`` whose ``data["turns"]`` lists the user messages in order, each with its check as data
(``{"user": text, "check": {...}}``); ``reset`` opens the conversation with the prompt's messages (a system prompt,
a worked example) and the first user message, and each ``step`` grades the assistant's reply and answers with the
next user message (role ``user``), so the sequence of requests never depends on the assistant: a prose reply, a
wrong one or one cut by the token budget all go on to the next turn. After the last turn the episode ends
(``submitted``) with the share of turns passed as the reward. A check (``check_reply``) reads the reply's text
only: ``number`` (the last integer in it: "3 + 5 = 8" answers 8), ``require`` (substrings it must hold) and
``forbid`` (substrings it must not hold), both ignoring case.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

from propel.envs.agent_env import AgentEnv, EpisodeState, Observation
from propel.errors import ConfigError
from propel.records import Context
from propel.sandbox.sandbox import Sandbox

_INT = re.compile(r"-?\d+")


def check_reply(text: str, check: dict[str, Any]) -> dict[str, bool]:
    """Each part of ``check`` that is present, judged on ``text``, and ``passed`` (all of them): ``number`` (the
    last integer in the text equals it), ``require`` (every substring present), ``forbid`` (none present); case is
    ignored."""
    out: dict[str, bool] = {}
    if "number" in check:
        found = _INT.findall(text)
        out["number"] = bool(found) and int(found[-1]) == int(check["number"])
    low = text.lower()
    if check.get("require"):
        out["require"] = all(s.lower() in low for s in check["require"])
    if check.get("forbid"):
        out["forbid"] = not any(s.lower() in low for s in check["forbid"])
    out["passed"] = all(out.values())
    return out


class ScriptedChatEnv(AgentEnv):
    """One scripted conversation (see the module docstring); no tools, no sandbox.

    Args:
        stop: strings that end an assistant turn besides the model's end-of-turn token (none by default).
    """

    tools: list[dict[str, Any]] = []

    def __init__(self, stop: tuple[str, ...] = ()) -> None:
        self.stop = tuple(stop)
        self._state = EpisodeState()
        self._turns: list[dict[str, Any]] = []
        self._results: list[dict[str, Any]] = []

    def reset(self, context: Context, sandbox: Sandbox | None = None) -> Observation:
        turns = context.data.get("turns")
        if not turns or not all(isinstance(t, dict) and "user" in t for t in turns):
            raise ConfigError(f"ScriptedChatEnv: context {context.id!r} needs data['turns']: [{{'user', 'check'}}]")
        self._turns, self._results = list(turns), []
        self._state = EpisodeState(episode_id=f"{context.id}-{uuid.uuid4().hex[:8]}")
        opening = list(context.prompt.messages or [])
        return Observation(messages=[*opening, {"role": "user", "content": turns[0]["user"]}])

    def step(self, action: str) -> Observation:
        if self._state.done:
            raise RuntimeError("step() after the episode ended")
        i = len(self._results)
        result = check_reply(action, self._turns[i].get("check", {}))
        self._results.append(result)
        self._state.step_count += 1
        if i + 1 < len(self._turns):
            return Observation(content=self._turns[i + 1]["user"], role="user", turn_reward=float(result["passed"]),
                               metadata={"check": result})  # fmt: skip
        return self._finish("submitted")

    def end(self, finish_reason: str) -> Observation:
        return self._finish(finish_reason)

    def _finish(self, reason: str) -> Observation:
        passed = [r["passed"] for r in self._results]
        reward = sum(passed) / len(self._turns) if self._turns else 0.0
        self._state.done, self._state.finish_reason = True, reason
        self._state.verifier = {"passed": len(passed) == len(self._turns) and all(passed), "turns": self._results,
                                "reward": reward}  # fmt: skip
        return Observation(done=True, reward=reward, finish_reason=reason)

    @property
    def state(self) -> EpisodeState:
        return self._state
